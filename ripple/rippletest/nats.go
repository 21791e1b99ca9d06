package rippletest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsReady bounds how long a start of the embedded server may take.
const natsReady = 10 * time.Second

// NATSServer is a real NATS server with JetStream, embedded in the test
// process (github.com/nats-io/nats-server/v2), on 127.0.0.1. Its
// JetStream store is in tb.TempDir(), so Shutdown and Start give the same
// server back, on the same port with the same streams and the same
// duplicate windows, the way a NATS server that restarts does.
type NATSServer struct {
	// URL is the server's client address, nats://127.0.0.1:<port>.
	URL string

	tb   testing.TB
	opts server.Options
	srv  *server.Server
}

// NewNATSServer starts a NATS server with JetStream on a free port of
// 127.0.0.1; it shuts down when the test ends.
func NewNATSServer(tb testing.TB) *NATSServer {
	tb.Helper()
	n := &NATSServer{tb: tb, opts: server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: tb.TempDir(),
		NoLog: true, NoSigs: true,
	}}
	n.Start()
	// From now on the same port: a client that reconnects finds it again.
	n.opts.Port = n.srv.Addr().(*net.TCPAddr).Port
	n.URL = fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port)
	tb.Cleanup(n.Shutdown)
	return n
}

// Start starts the server again after Shutdown; it does nothing while the
// server runs.
func (n *NATSServer) Start() {
	n.tb.Helper()
	if n.srv != nil {
		return
	}
	opts := n.opts // the server keeps and changes its options
	srv, err := server.NewServer(&opts)
	if err != nil {
		n.tb.Fatalf("nats server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(natsReady) {
		srv.Shutdown()
		n.tb.Fatalf("nats server not ready within %s", natsReady)
	}
	n.srv = srv
}

// Shutdown stops the server and waits until it has; it does nothing if the
// server is not running.
func (n *NATSServer) Shutdown() {
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// JetStream returns a JetStream client of the server, for a test to look
// at streams and messages as a consumer would; it is closed when the test
// ends.
func (n *NATSServer) JetStream() jetstream.JetStream {
	n.tb.Helper()
	nc, err := nats.Connect(n.URL, nats.Name("rippletest"))
	if err != nil {
		n.tb.Fatalf("nats connect: %v", err)
	}
	n.tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		n.tb.Fatalf("jetstream: %v", err)
	}
	return js
}

// Messages returns every message of stream, in stream order; none if the
// stream does not exist.
func (n *NATSServer) Messages(stream string) []*jetstream.RawStreamMsg {
	n.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natsReady)
	defer cancel()
	st, err := n.JetStream().Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	} else if err != nil {
		n.tb.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		n.tb.Fatalf("stream %s: %v", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		} else if err != nil {
			n.tb.Fatalf("stream %s message %d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}
