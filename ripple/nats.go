package ripple

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
)

// EffectNATS is the effect, and the delivery target, of the JetStream
// relay.
const EffectNATS = "nats"

// natsConnected is the gauge that is 1 while the relay is connected to a
// NATS server and 0 while it reconnects; it is made with the first relay,
// so a paystate without one does not export it.
func natsConnected() *metrics.Gauge {
	return metrics.GetOrCreateGauge(`paystate_relay_nats_connected`, nil)
}

// Defaults of the JetStream relay; the configuration's defaults are the
// same.
const (
	DefaultNATSStream        = "PAYSTATE"
	DefaultNATSSubjectPrefix = "paystate"
	// DefaultNATSConnectTimeout bounds the connection to one server at
	// start, and each dial of a reconnection.
	DefaultNATSConnectTimeout = 5 * time.Second
	// DefaultNATSPublishTimeout bounds one attempt: the stream's look-up
	// if it is due, the publish and its acknowledgement.
	DefaultNATSPublishTimeout = 10 * time.Second
	// DefaultNATSReconnectWait is the pause between two rounds of
	// reconnection attempts.
	DefaultNATSReconnectWait = 2 * time.Second
)

// NATSConfig configures the JetStream relay.
type NATSConfig struct {
	// URL is the NATS server, nats://host:4222 (or tls://, ws://, wss://),
	// or several of one cluster separated by commas. Credentials may be in
	// it (nats://user:password@host, nats://token@host); they never reach
	// a log line or an error.
	URL string
	// Stream is the JetStream stream; default DefaultNATSStream.
	Stream string
	// SubjectPrefix is the first tokens of every subject; default
	// DefaultNATSSubjectPrefix.
	SubjectPrefix string
	// ConnectTimeout: default DefaultNATSConnectTimeout.
	ConnectTimeout time.Duration
	// PublishTimeout: default DefaultNATSPublishTimeout.
	PublishTimeout time.Duration
	// ReconnectWait: default DefaultNATSReconnectWait.
	ReconnectWait time.Duration
	// MaxInFlight caps the attempts that run at once; default
	// DefaultMaxInFlight, at most MaxInFlightLimit.
	MaxInFlight int
}

// NATSRelay is the "nats" target of a Service, [relay.nats] in the
// configuration. Make it with Service.AddNATS; Close it after the
// Service's workers have stopped.
//
// Every outbox record is published to NATS JetStream on
// <subject_prefix>.<event type> ("paystate.payment.captured"), the body
// being the merchant webhook's JSON (NewEvent, encoded as a webhook
// delivery encodes it) and the header Nats-Msg-Id the outbox event id.
// The relay is one more target, "nats", with its own lane: one delivery
// per outbox record, the same attempts, backoff, dead letters, Retry and
// metrics as a merchant endpoint, and the same order per payment (a
// payment's next record waits until the previous one is done). An attempt
// is done when the server acknowledges the publish, so a record reaches
// the stream at least once; a publish repeated after an acknowledgement
// that got lost, or after a crash between the acknowledgement and the
// delivery's own update, carries the same Nats-Msg-Id, and JetStream
// drops it within the stream's duplicate window (2 minutes unless the
// stream says otherwise): the attempt is then done as "skipped", with a
// note saying so.
//
// AddNATS connects at start, each server of the URL tried once within the
// connect timeout. If none answers, or the connection drops later, the
// client reconnects in the background without end, and meanwhile every
// attempt fails at once, without buffering, and is retried with backoff
// like an attempt to a merchant endpoint that is down: the lane holds no
// goroutine while NATS is away, and no other target waits for it.
//
// The stream is looked up when the relay connects and before its first
// publish; a missing one is created with the subjects <subject_prefix>.>
// and the server's defaults otherwise. An existing stream is used as it
// is, never changed; a publish names the stream it expects
// (Nats-Expected-Stream), so a message never lands in another stream that
// happens to take the subject. When no stream takes the subject (the
// stream was deleted, or an existing one does not cover the prefix), the
// attempt fails and the next one looks the stream up again, creating it if
// it is gone.
type NATSRelay struct {
	stream         string
	prefix         string
	publishTimeout time.Duration
	maxInFlight    int
	logger         zerolog.Logger

	nc *nats.Conn
	js jetstream.JetStream

	mu    sync.Mutex // held while the stream is looked up or created
	ready bool       // the stream was found or created since the last miss
}

// AddNATS makes the JetStream relay a target of s, with its own lane, and
// connects it (see NATSConfig). A NATS server that does not answer is not
// an error: the relay reconnects in the background and its deliveries
// wait. An error says what is wrong with cfg, never quoting the URL.
//
// Call it once, after setting s.Logger and before the first pass (Run or
// RunOnce); the outbox records fanned out from then on are relayed.
func (s *Service) AddNATS(cfg NATSConfig) (*NATSRelay, error) {
	if _, dup := s.effects[EffectNATS]; dup {
		return nil, errors.New("ripple: nats: the relay is added twice")
	}
	r, err := newNATSRelay(cfg, s.Logger.With().Str("effect", EffectNATS).Logger())
	if err != nil {
		return nil, fmt.Errorf("ripple: nats: %w", err)
	}
	s.add(r, r.maxInFlight)
	return r, nil
}

func newNATSRelay(cfg NATSConfig, logger zerolog.Logger) (*NATSRelay, error) {
	if err := checkNATSURL(cfg.URL); err != nil {
		return nil, err
	}
	r := &NATSRelay{
		stream: cmp.Or(cfg.Stream, DefaultNATSStream), prefix: cmp.Or(cfg.SubjectPrefix, DefaultNATSSubjectPrefix),
		publishTimeout: cfg.PublishTimeout, maxInFlight: cfg.MaxInFlight, logger: logger,
	}
	if strings.ContainsAny(r.stream, ">*. /\\\t\r\n") {
		return nil, fmt.Errorf("stream %q: a stream name has no dots, wildcards, slashes or spaces", r.stream)
	}
	if !validSubject(r.prefix) || strings.HasPrefix(r.prefix, "$") {
		return nil, fmt.Errorf("subject prefix %q: want tokens separated by dots, without wildcards or spaces, not starting with $ (the server's own)", r.prefix)
	}
	r.publishTimeout = defaults.Or(r.publishTimeout, DefaultNATSPublishTimeout)
	if r.maxInFlight == 0 {
		r.maxInFlight = DefaultMaxInFlight
	}
	if r.maxInFlight < 1 || r.maxInFlight > MaxInFlightLimit {
		return nil, fmt.Errorf("max in flight must be from 1 to %d, got %d", MaxInFlightLimit, cfg.MaxInFlight)
	}
	connectTimeout := defaults.Or(cfg.ConnectTimeout, DefaultNATSConnectTimeout)
	reconnectWait := defaults.Or(cfg.ReconnectWait, DefaultNATSReconnectWait)

	nc, err := nats.Connect(cfg.URL,
		nats.Name("paystate"),
		nats.Timeout(connectTimeout),
		// Down at start or later: reconnect in the background, for ever.
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		// No buffering while disconnected: a publish fails at once and
		// the delivery is retried with backoff, as for an endpoint that
		// is down.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(nc *nats.Conn) {
			natsConnected().Set(1)
			logger.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("nats relay connected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			natsConnected().Set(1)
			logger.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("nats relay connected")
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			natsConnected().Set(0)
			if err != nil {
				logger.Warn().Err(err).Msg("nats relay disconnected: reconnecting; its deliveries are retried meanwhile")
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			logger.Warn().Err(err).Msg("nats relay")
		}),
	)
	if err != nil {
		// A url.Error would quote the URL, which may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	r.nc = nc
	if nc.IsConnected() {
		natsConnected().Set(1)
	} else {
		natsConnected().Set(0)
	}
	if r.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	if !nc.IsConnected() {
		logger.Warn().Stringer("timeout", connectTimeout).
			Msg("nats relay: no server answered at start; reconnecting in the background, deliveries wait")
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := r.ensureStream(ctx); err != nil {
		logger.Warn().Err(err).Msg("nats relay: the first delivery tries again")
	}
	return r, nil
}

// checkNATSURL checks a NATS URL, or a comma-separated list of them,
// without quoting it.
func checkNATSURL(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("url is empty")
	}
	for i, item := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(item))
		if err != nil || u.Host == "" {
			return fmt.Errorf("url %d is not an absolute URL such as nats://127.0.0.1:4222", i+1)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("url %d has the scheme %q, want nats, tls, ws or wss", i+1, u.Scheme)
		}
	}
	return nil
}

// validSubject reports whether s is a NATS subject without wildcards:
// non-empty tokens separated by dots, with no space or control character.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*>") {
			return false
		}
		for _, c := range tok {
			if c <= ' ' || c == 0x7f {
				return false
			}
		}
	}
	return true
}

// Connected reports whether the relay is connected to a NATS server now.
func (r *NATSRelay) Connected() bool { return r.nc.IsConnected() }

// Stream is the JetStream stream the relay publishes to.
func (r *NATSRelay) Stream() string { return r.stream }

// Close closes the connection; deliveries attempted afterwards fail. Call
// it after the Service's workers have stopped.
func (r *NATSRelay) Close() { r.nc.Close() }

func (*NATSRelay) name() string                { return EffectNATS }
func (*NATSRelay) endpoint() string            { return "" }
func (*NATSRelay) wants(pay.OutboxRecord) bool { return true }

// Subject returns the subject a record of type eventType is published on.
func (r *NATSRelay) Subject(eventType string) string { return r.prefix + "." + eventType }

func (r *NATSRelay) deliver(ctx context.Context, _ pay.Delivery, rec pay.OutboxRecord) (outcome, error) {
	subject := r.Subject(rec.Type)
	if !validSubject(rec.Type) {
		return outcome{permanent: true}, fmt.Errorf("nats: event type %q cannot be a subject", rec.Type)
	}
	body, err := json.Marshal(NewEvent(rec)) // the merchant webhook's body
	if err != nil {
		return outcome{permanent: true}, fmt.Errorf("nats: encode event: %w", err)
	}
	if st := r.nc.Status(); st != nats.CONNECTED {
		return outcome{}, fmt.Errorf("nats: not connected (%s); the relay reconnects in the background", strings.ToLower(st.String()))
	}
	ctx, cancel := context.WithTimeout(ctx, r.publishTimeout)
	defer cancel()
	if err := r.ensureStream(ctx); err != nil {
		return r.failed(ctx, err)
	}
	msg := &nats.Msg{Subject: subject, Data: body}
	ack, err := r.js.PublishMsg(ctx, msg, jetstream.WithMsgID(rec.ID), jetstream.WithExpectStream(r.stream))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			r.forgetStream() // deleted? the next attempt looks again
			err = fmt.Errorf("no stream takes the subject: does stream %s exist and take %s.>? (%w)", r.stream, r.prefix, err)
		}
		return r.failed(ctx, fmt.Errorf("publish %s: %w", subject, err))
	}
	if ack.Duplicate {
		return outcome{skipped: true, note: fmt.Sprintf("in stream %s already, as message %d: the server dropped the duplicate", ack.Stream, ack.Sequence)}, nil
	}
	return outcome{note: fmt.Sprintf("published to stream %s as message %d", ack.Stream, ack.Sequence)}, nil
}

// failed returns the failure of an attempt to be retried, saying so when
// the publish timeout ran out.
func (r *NATSRelay) failed(ctx context.Context, err error) (outcome, error) {
	if errors.Is(err, context.Canceled) {
		return outcome{}, err // shutting down: not the server's failure
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no acknowledgement within %s", err, r.publishTimeout)
	}
	return outcome{}, fmt.Errorf("nats: %w", err)
}

// ensureStream looks the stream up, once until forgetStream, and creates
// it if it is missing.
func (r *NATSRelay) ensureStream(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		return nil
	}
	_, err := r.js.Stream(ctx, r.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = r.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        r.stream,
			Description: "paystate outbox events",
			Subjects:    []string{r.prefix + ".>"},
		})
		switch {
		case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
			err = nil // created meanwhile, by another paystate: use it as it is
		case err == nil:
			r.logger.Info().Str("stream", r.stream).Str("subjects", r.prefix+".>").Msg("nats relay: stream created")
		}
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", r.stream, err)
	}
	r.ready = true
	return nil
}

// forgetStream has the next attempt look the stream up again.
func (r *NATSRelay) forgetStream() {
	r.mu.Lock()
	r.ready = false
	r.mu.Unlock()
}
