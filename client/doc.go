// Package client paces an HTTP client by the rate-limit headers of the
// servers it calls, so that it waits for quota instead of spending
// requests on 429 Too Many Requests. It is the other side of package
// ratelimit's middleware, and reads what most servers send:
//
//	c := &http.Client{Transport: &client.Transport{}}
//
// # What it reads
//
// From every response, unless it came from a cache (a positive Age):
//
//   - RateLimit and RateLimit-Policy, as
//     draft-ietf-httpapi-ratelimit-headers-10 defines them: Structured
//     Field Lists of policies named by a String, with r (requests left) and
//     t (seconds until more are) for each in RateLimit, and pk (partition
//     key) in either. An item without t takes its policy's window w from
//     RateLimit-Policy; an item whose policy counts another unit (qu) than
//     requests is skipped, and r is capped at the policy's q. A field that
//     is malformed, or longer than 4 KiB, is ignored whole.
//   - Otherwise X-RateLimit-Remaining and X-RateLimit-Reset, capped at
//     X-RateLimit-Limit. The reset is read as the seconds until it or, as
//     GitHub sends it, as its Unix time: a value within a year after the
//     response's Date (else now), or a day before, is a Unix time,
//     measured from Date so that clock skew does not matter; a value of at
//     most a year of seconds otherwise is a count of seconds; anything
//     else is ignored.
//   - Retry-After, as delay seconds or an HTTP date (measured from Date),
//     on a 429, a 503, and a 403 (GitHub's secondary limits): nothing is
//     sent to the server until then, and it takes precedence over a spent
//     quota's reset.
//
// Resets and waits are capped at a year. Parsing is one pass over a
// bounded input, allocates nothing for a field sent in one line, and
// ignores what it cannot read.
//
// # How it waits
//
// A Transport keeps, per origin (scheme and host) and partition (see
// Transport.Partition), what the server last said of each policy and
// partition key: how many requests remain and when more become available.
// It remembers at most 1024 origins and partitions, the least recently
// used forgotten first, and 16 quotas of each.
//
// A request goes when every quota has a request left beyond those in
// flight: requests in flight reserve what is left, so goroutines sharing
// a Transport never spend the same last request between them. Otherwise
// it waits until the quota's reset, or Retry-After, or until an answer to
// a request in flight frees what it held. Figures only lower what a quota
// has left until its reset, since answers may arrive in any order. After
// a reset, the draft warns that the quota need not be whole again (a
// sliding window gives back one request at a time), so one request goes
// alone, and its answer's figures replace the old ones; a quota it does
// not mention is forgotten. A response without figures of a quota is
// taken to have spent one request of it, unless it is a 429 or came from
// a cache. So is a request that Base fails, since the server may have
// counted it before the failure, unless it never left: a failed dial of
// its connection (DNS lookup included) or of its proxy, a *net.OpError
// of Op "dial" or "proxyconnect", and a failed TLS handshake (a
// *tls.CertificateVerificationError, a tls.RecordHeaderError, or an alert
// from the server, a *net.OpError of Op "remote error"), spent nothing,
// if Base wrote none of the request before it (as an
// httptrace.ClientTrace's WroteHeaders tells: net/http sends a request
// again on a new connection when the one it reused closed before the
// answer). Waiting requests are not served in order.
//
// The wait honours the request's context: a wait for a reset (or
// Retry-After) that comes at or after the context's deadline is not
// begun, and RoundTrip returns at once with an error matching
// context.DeadlineExceeded; a wait whose end is not known (for the
// answers of requests in flight) ends, if the context is done first, with
// the context's error. Set MaxRetries to send a refused request
// again after the wait its refusal asks for.
//
// # What it does not do
//
// It cannot know of a quota shared with other clients, processes or
// machines: it learns of their requests only from the server's figures,
// and a request of theirs between two of its own can still make it meet
// a 429. It trusts the server's figures: a server that reports more than
// it grants gets 429s, and one that reports a reset a day away makes it
// wait a day (bound the wait with a context deadline). Until a server's
// first answer it does not pace at all, and it does not spread requests
// over a window: it spends what is left, then waits. It knows nothing of
// what a request costs beyond one request, nor of concurrency limits. A
// long request holds the quota it reserved until its answer comes, and a
// probe after a reset holds back the others until its own answer.
package client
