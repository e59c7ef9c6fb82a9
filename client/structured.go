package client

import "strings"

// This file reads the two fields of draft-ietf-httpapi-ratelimit-headers,
// which are Structured Field Lists (RFC 9651). The server controls them,
// so the parser is one pass over at most maxFieldBytes with a cursor that
// only moves forward, keeps at most maxItems members, allocates nothing
// for a field of one line (names and keys are substrings of it) and never
// panics.

const (
	// maxFieldBytes caps a field, all its lines together: a field longer
	// than that is ignored, as a malformed one is.
	maxFieldBytes = 4096
	// maxItems caps the members kept from one field; the rest are parsed,
	// so that the field is still checked whole, and dropped.
	maxItems = 16
	// maxLines caps the lines of one field that are read.
	maxLines = 16
)

// absent marks an integer parameter that a member does not carry, and
// invalid one that it carries as something other than a non-negative
// Integer, which makes the member unusable.
const (
	absent  int64 = -1
	invalid int64 = -2
)

// member is one member of a RateLimit or RateLimit-Policy list: a String
// naming a policy, and the parameters either field defines. name and the
// strings are as sent, escapes included, which is how both fields spell
// one name alike.
type member struct {
	name     string
	isString bool // the member is a String (the others are no policy)
	q, w     int64
	r, t     int64
	qu       string // quota unit, "" when absent
	quBad    bool   // qu is not a String
	pk       string // partition key: the Byte Sequence's base64 text
	pkBad    bool   // pk is not a Byte Sequence
}

// usable reports whether m names a policy and carries no parameter of
// the wrong type.
func (m *member) usable() bool {
	return m.isString && m.q != invalid && m.w != invalid && m.r != invalid && m.t != invalid && !m.quBad && !m.pkBad
}

// parseList parses the lines of one List field into ms and returns the
// number of members kept, or ok false when the field is malformed or too
// long, in which case it is to be ignored whole. The lines are parsed
// joined by commas, as RFC 9651 joins them (a String may span two); blank
// lines are skipped, as a field with an empty value is no member.
func parseList(lines []string, ms *[maxItems]member) (n int, ok bool) {
	s, ok := joinLines(lines)
	if !ok {
		return 0, false
	}
	p := sfParser{s: s}
	for p.skipSP(); !p.done(); {
		var m member
		if !p.member(&m) {
			return 0, false
		}
		if n < maxItems {
			ms[n] = m
			n++
		}
		if !p.nextMember() {
			return 0, false
		}
	}
	return n, true
}

// joinLines returns the non-blank lines of a field joined by ", ", or ok
// false when there are more than maxLines lines or they hold more than
// maxFieldBytes. It owns the caps on a field's size, so that the parser
// only ever sees a bounded string; a field of one line is returned as it
// is, without a copy.
func joinLines(lines []string) (s string, ok bool) {
	if len(lines) > maxLines {
		return "", false
	}
	total, parts := 0, 0
	for _, l := range lines {
		if trimOWS(l) != "" {
			s = l
			total += len(l)
			parts++
		}
	}
	if total > maxFieldBytes {
		return "", false
	}
	if parts <= 1 {
		return s, true
	}
	var b strings.Builder
	b.Grow(total + 2*(parts-1))
	for _, l := range lines {
		if trimOWS(l) != "" {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(l)
		}
	}
	return b.String(), true
}

// nextMember moves past what follows a List member: the end of the
// field, or a comma and the whitespace around it before the next member.
// It reports false when the field is malformed there: something other
// than a comma, or a trailing comma.
func (p *sfParser) nextMember() bool {
	p.skipOWS()
	if p.done() {
		return true
	}
	if !p.eat(',') {
		return false
	}
	p.skipOWS()
	return !p.done() // else a trailing comma
}

// sfParser is a cursor over one field line.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) eat(c byte) bool {
	if !p.done() && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *sfParser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// member parses an Item or an Inner List, with its parameters, into m.
// Only a String Item's parameters are kept.
func (p *sfParser) member(m *member) bool {
	m.q, m.w, m.r, m.t = absent, absent, absent, absent
	if p.eat('(') {
		for {
			p.skipSP()
			if p.eat(')') {
				return p.params(nil)
			}
			if !p.bareItem(nil) || !p.params(nil) {
				return false
			}
			if c := p.peek(); c != ' ' && c != ')' {
				return false
			}
		}
	}
	if !p.bareItem(m) {
		return false
	}
	if !m.isString {
		return p.params(nil)
	}
	return p.params(m)
}

// params parses Parameters, keeping in m (when not nil) those the
// RateLimit fields define; a later one of a name replaces an earlier.
func (p *sfParser) params(m *member) bool {
	for p.eat(';') {
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return false
		}
		var v value
		if p.eat('=') {
			if !p.bareValue(&v) {
				return false
			}
		} else {
			v.kind = kindBoolean
		}
		if m == nil {
			continue
		}
		switch key {
		case "q":
			m.q = v.nonNegative()
		case "w":
			m.w = v.nonNegative()
		case "r":
			m.r = v.nonNegative()
		case "t":
			m.t = v.nonNegative()
		case "qu":
			m.qu, m.quBad = v.text, v.kind != kindString
		case "pk":
			m.pk, m.pkBad = v.text, v.kind != kindBytes
		}
	}
	return true
}

// key parses a Parameter key.
func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		return "", false
	}
	for p.i++; !p.done(); p.i++ {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
	}
	return p.s[start:p.i], true
}

type kind uint8

const (
	kindInteger kind = iota + 1
	kindDecimal
	kindString
	kindToken
	kindBytes
	kindBoolean
	kindDate
	kindDisplay
)

// value is a Bare Item: its kind, an Integer's value, and the text of a
// String (escapes as sent) or of a Byte Sequence (its base64).
type value struct {
	kind kind
	n    int64
	text string
}

// nonNegative returns an Integer's value, or invalid for any other
// value and for a negative one.
func (v *value) nonNegative() int64 {
	if v.kind != kindInteger || v.n < 0 {
		return invalid
	}
	return v.n
}

// bareItem parses an Item's Bare Item; into m, when not nil, whether it
// is a String and its text.
func (p *sfParser) bareItem(m *member) bool {
	var v value
	if !p.bareValue(&v) {
		return false
	}
	if m != nil && v.kind == kindString {
		m.isString, m.name = true, v.text
	}
	return true
}

// bareValue parses a Bare Item of any kind RFC 9651 defines.
func (p *sfParser) bareValue(v *value) bool {
	switch c := p.peek(); {
	case p.done():
		return false
	case c == '-' || c >= '0' && c <= '9':
		return p.number(v)
	case c == '"':
		v.kind = kindString
		return p.quoted(&v.text)
	case c == ':':
		v.kind = kindBytes
		return p.bytes(&v.text)
	case c == '?':
		v.kind = kindBoolean
		p.i++
		return p.eat('0') || p.eat('1')
	case c == '@':
		p.i++
		if !p.number(v) || v.kind != kindInteger {
			return false
		}
		v.kind = kindDate
		return true
	case c == '%':
		v.kind = kindDisplay
		p.i++
		return p.display()
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		v.kind = kindToken
		p.token()
		return true
	}
	return false
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// digits, a dot, and 1 to 3 digits).
func (p *sfParser) number(v *value) bool {
	neg := p.eat('-')
	v.kind = kindInteger
	var n int64
	digits, frac := 0, -1 // frac counts the digits after a dot, once there is one
scan:
	for ; !p.done(); p.i++ {
		switch c := p.s[p.i]; {
		case c >= '0' && c <= '9' && frac >= 0:
			if frac++; frac > 3 {
				return false
			}
		case c >= '0' && c <= '9':
			if digits++; digits > 15 {
				return false
			}
			n = n*10 + int64(c-'0')
		case c == '.' && frac < 0 && digits <= 12:
			frac = 0
			v.kind = kindDecimal
		default:
			break scan
		}
	}
	if digits == 0 || frac == 0 {
		return false
	}
	if neg {
		n = -n
	}
	v.n = n
	return true
}

// quoted parses a String, leaving in text what lies between the quotes.
func (p *sfParser) quoted(text *string) bool {
	p.i++ // the opening quote
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		switch {
		case c == '\\':
			p.i++
			if c := p.peek(); c != '"' && c != '\\' {
				return false
			}
		case c == '"':
			*text = p.s[start:p.i]
			p.i++
			return true
		case c < 0x20 || c > 0x7e:
			return false
		}
		p.i++
	}
	return false
}

// bytes parses a Byte Sequence, leaving its base64 text in text.
func (p *sfParser) bytes(text *string) bool {
	p.i++
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		switch {
		case c == ':':
			*text = p.s[start:p.i]
			p.i++
			return true
		case !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='):
			return false
		}
		p.i++
	}
	return false
}

// token parses a Token, whose first character the caller checked.
func (p *sfParser) token() {
	for p.i++; !p.done(); p.i++ {
		if !isTokenChar(p.s[p.i]) {
			return
		}
	}
}

// isTokenChar reports whether c may follow a Token's first character:
// tchar, ':' or '/'.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}

// display parses a Display String after its '%': a quoted string of
// printable ASCII in which '%' introduces two lower-case hex digits. It
// does not check that the bytes decode as UTF-8: no policy is a Display
// String, so the value is only skipped.
func (p *sfParser) display() bool {
	if !p.eat('"') {
		return false
	}
	for !p.done() {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c == '%':
			if p.i+2 >= len(p.s) || !isLowerHex(p.s[p.i+1]) || !isLowerHex(p.s[p.i+2]) {
				return false
			}
			p.i += 2
		case c < 0x20 || c > 0x7e:
			return false
		}
		p.i++
	}
	return false
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
