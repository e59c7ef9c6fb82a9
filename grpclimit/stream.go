package grpclimit

import (
	"net/http"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/slidelog/ratelimit"
)

// serverStream is a stream the limiter watches: it holds the rate-limit
// metadata back until the handler first sends, so that a stream the
// handler fails without sending stays a trailers-only response, and under
// CountMessages it decides each received message.
//
// grpc-go allows one goroutine in SendMsg and another in RecvMsg at the
// same time; mu guards what both touch.
type serverStream struct {
	grpc.ServerStream
	l *ratelimit.Limiter // under CountMessages; else nil
	r *http.Request      // the call as l sees it, under CountMessages

	mu         sync.Mutex
	pending    metadata.MD // the latest rate-limit metadata not yet sent
	headerSent bool        // the handler has sent: pending waits for the trailer
	refused    error       // the status of the refused message that ended the stream
}

// RecvMsg receives a message and, under CountMessages, decides it.
func (s *serverStream) RecvMsg(m any) error {
	if s.r == nil {
		return s.ServerStream.RecvMsg(m)
	}
	if err := s.err(); err != nil {
		return err
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	d := s.l.Decide(s.r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Outcome != ratelimit.Serve {
		// m holds the refused message now: clear it, so that a handler
		// that ignores the error does not act on it.
		if pm, ok := m.(interface{ Reset() }); ok {
			pm.Reset()
		}
		st, md := answer(s.l, d)
		s.refused, s.pending = st.Err(), md
		return s.refused
	}
	// The latest standing, or none if the message was served without one
	// (failed open): never an earlier message's, stale by this one.
	s.pending = quotaMetadata(s.l, d)
	return nil
}

// SendMsg sends the pending rate-limit metadata with the first message.
func (s *serverStream) SendMsg(m any) error {
	if err := s.sendHeader(); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

// SendHeader sends the pending rate-limit metadata with md.
func (s *serverStream) SendHeader(md metadata.MD) error {
	if err := s.sendHeader(); err != nil {
		return err
	}
	return s.ServerStream.SendHeader(md)
}

// sendHeader sets the pending metadata as the headers the handler is about
// to send, unless it has sent already.
func (s *serverStream) sendHeader() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused != nil {
		return s.refused
	}
	if !s.headerSent {
		s.headerSent = true
		// Setting fails if the handler sent its headers through
		// grpc.SendHeader: pending then waits for the trailer.
		if s.pending != nil && s.ServerStream.SetHeader(s.pending) == nil {
			s.pending = nil
		}
	}
	return nil
}

func (s *serverStream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// finish sets what is still pending as the trailer and returns the
// stream's status: the refusal that ended it, if any, else the handler's.
func (s *serverStream) finish(handlerErr error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		s.ServerStream.SetTrailer(s.pending)
	}
	if s.refused != nil {
		return s.refused
	}
	return handlerErr
}
