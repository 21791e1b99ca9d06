// Package rippletest holds the real peers that tests of the ripple effects
// talk to: an SMTP server (github.com/emersion/go-smtp) and a merchant
// webhook endpoint (net/http/httptest), both on 127.0.0.1, both recording
// what they receive and both able to refuse on demand, and an endpoint
// that takes connections and never answers.
package rippletest

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
)

// Message is one e-mail an SMTPServer accepted.
type Message struct {
	From string
	To   []string
	Data []byte // the message as received: headers, blank line, body
}

// SMTPServer is a real SMTP server on 127.0.0.1. Each DATA command counts
// as an attempt; it refuses the first FailFirst attempts with a 451
// (temporary) error and keeps the messages of the others.
type SMTPServer struct {
	// Addr is the server's host:port.
	Addr string

	mu        sync.Mutex
	failFirst int
	attempts  int
	msgs      []Message
}

// NewSMTPServer starts an SMTP server that refuses the first failFirst
// messages; it stops when the test ends.
func NewSMTPServer(tb testing.TB, failFirst int) *SMTPServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &SMTPServer{Addr: ln.Addr().String(), failFirst: failFirst}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// Attempts returns how many messages were offered (DATA commands).
func (s *SMTPServer) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Messages returns the messages accepted, in arrival order.
func (s *SMTPServer) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// session is one SMTP conversation.
type session struct {
	s    *SMTPServer
	from string
	to   []string
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error { ss.from = from; return nil }

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.attempts <= s.failFirst {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.msgs = append(s.msgs, Message{From: ss.from, To: append([]string(nil), ss.to...), Data: data})
	return nil
}

// Request is one request an Endpoint received.
type Request struct {
	Header http.Header
	Body   []byte
	Status int // what the endpoint answered
}

// Endpoint is a merchant webhook endpoint on 127.0.0.1. It answers every
// request with the current answer (200 until Answer changes it) and
// records it.
type Endpoint struct {
	// URL is the endpoint's address.
	URL string

	mu     sync.Mutex
	status int
	header http.Header
	reqs   []Request
}

// NewEndpoint starts an endpoint that answers 200; it stops when the test
// ends.
func NewEndpoint(tb testing.TB) *Endpoint {
	tb.Helper()
	e := &Endpoint{status: http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(e.serve))
	tb.Cleanup(srv.Close)
	e.URL = srv.URL + "/hooks/paystate"
	return e
}

// Answer sets the status and headers of the following answers.
func (e *Endpoint) Answer(status int, header http.Header) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.header = status, header
}

// Requests returns the requests received, in arrival order.
func (e *Endpoint) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.reqs...)
}

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	status, header := e.status, e.header
	e.reqs = append(e.reqs, Request{Header: r.Header.Clone(), Body: bytes.Clone(body), Status: status})
	e.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
}

// SilentEndpoint is a merchant webhook endpoint that never answers: a TCP
// listener on 127.0.0.1 that accepts every connection, reads what comes
// and writes nothing, the way a hung server or a black-holing proxy
// behaves. It counts the connections it holds.
type SilentEndpoint struct {
	// URL is the endpoint's address.
	URL string

	mu       sync.Mutex
	conns    map[net.Conn]bool
	accepted int
	maxOpen  int
	closed   bool
}

// NewSilentEndpoint starts a silent endpoint; it closes its listener and
// every connection when the test ends.
func NewSilentEndpoint(tb testing.TB) *SilentEndpoint {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &SilentEndpoint{URL: "http://" + ln.Addr().String() + "/hooks/paystate", conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				_ = c.Close()
				return
			}
			s.conns[c] = true
			s.accepted++
			s.maxOpen = max(s.maxOpen, len(s.conns))
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c) // until the client gives up
				_ = c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	return s
}

// Accepted returns how many connections were accepted.
func (s *SilentEndpoint) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Open returns how many connections are open now.
func (s *SilentEndpoint) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// MaxOpen returns the most connections that were open at once.
func (s *SilentEndpoint) MaxOpen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxOpen
}
