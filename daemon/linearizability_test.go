package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// The linearizability check. Several clients per payment race against the
// real HTTP API of a booted paystate (standard provider, report mode):
//
//   - POST /v1/payments/{id}/sync with a status, sometimes a client secret,
//     and an expected_version that is absent, the version the client last
//     saw, or a random one (one above the payment's version, which it
//     never had, is refused: 400 naming expected_version, nothing changes);
//   - signed POST /webhooks/standard events;
//   - GET /v1/payments/{id}.
//
// Every operation is recorded with its call and return times and checked
// with porcupine against a sequential model of the SPEC's state machine:
// the state of a payment is (status, version, whether a client secret is
// stored); an observation changes it as pay.Decide says, every write bumps
// the version by exactly 1, a terminal status erases the secret, and the
// client view shows the secret only in created, processing and
// requires_action.
//
// Webhooks. The 200 of POST /webhooks means "stored", not "applied": the
// inbox worker applies the event later, under the payment's lease. So a
// webhook is modelled as an operation whose interval runs from the moment
// the client sent it to the moment the client saw its step in the
// payment's timeline (GET /v1/payments/{id}/events, polled); the effect
// took place somewhere in between, which is exactly what an operation
// interval means to the checker. Its output is the step's kind
// (transition, duplicate, stale, conflicting_terminal) and the version the
// step carries, which the model predicts from the state at the
// linearization point. Letting webhooks be unknown concurrent writers
// instead would have left the reads unexplainable, since the model could
// not tell which writes had happened.
//
// Every client mixes the three kinds, so a payment has several webhooks in
// flight at once as well as reports racing them.
//
// Each sync and read response carries status and version (and the sync its
// conflict flag), so those outputs are checked exactly. The history is
// partitioned by payment, which keeps the check fast for thousands of
// operations.

type linKind int

const (
	linRead linKind = iota
	linSync
	linWebhook
)

// linInput is one operation's input.
type linInput struct {
	payment  string
	kind     linKind
	status   pay.Status // sync and webhook
	expected uint64     // sync: expected_version, 0 = none
	secret   bool       // sync: carries a client secret
}

// linOutput is what an operation observed.
type linOutput struct {
	status   pay.Status // sync and read
	version  uint64     // sync and read: the payment's; webhook: the step's
	conflict bool       // sync
	refused  bool       // sync: 400 naming expected_version, above the payment's version
	secret   bool       // sync and read: client_secret present in the answer
	step     string     // webhook: the kind of its timeline step
}

// linState is the model's state of one payment.
type linState struct {
	status  pay.Status
	version uint64
	secret  bool // a client secret is stored
}

// linObserve applies an observation to a state: the SPEC's rules through
// pay.Decide, version +1 on every write, and the client-secret rule (kept
// when reported with a status that shows it, erased by a terminal status;
// a new secret for the same status is a write of its own). It returns the
// new state and the timeline step the write records.
func linObserve(s linState, obs pay.Status, secret bool) (linState, string) {
	switch pay.Decide(s.status, obs) {
	case pay.Apply:
		n := linState{status: obs, version: s.version + 1, secret: s.secret || secret && obs.ShowsSecrets()}
		if obs.Terminal() {
			n.secret = false
		}
		return n, pay.StepTransition
	case pay.Duplicate:
		if secret && obs.ShowsSecrets() && !s.secret {
			return linState{status: s.status, version: s.version + 1, secret: true}, pay.StepUpdate
		}
		return s, pay.StepDuplicate
	case pay.Stale:
		return s, pay.StepStale
	default:
		return s, pay.StepAnomaly
	}
}

// linModel is the sequential specification porcupine checks against.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byPayment := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			id := op.Input.(linInput).payment
			if _, ok := byPayment[id]; !ok {
				order = append(order, id)
			}
			byPayment[id] = append(byPayment[id], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, id := range order {
			out = append(out, byPayment[id])
		}
		return out
	},
	Init: func() any { return linState{status: pay.Created, version: 1} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		switch in.kind {
		case linRead:
			want := linOutput{status: s.status, version: s.version, secret: s.secret && s.status.ShowsSecrets()}
			return out == want, s
		case linSync:
			if in.expected > s.version {
				// A version the payment never had: refused, nothing
				// changes.
				return out == linOutput{refused: true}, s
			}
			n, _ := linObserve(s, in.status, in.secret)
			want := linOutput{
				status: n.status, version: n.version,
				conflict: in.expected != 0 && in.expected != s.version,
				secret:   n.secret && n.status.ShowsSecrets(),
			}
			return out == want, n
		default:
			n, step := linObserve(s, in.status, false)
			return out == linOutput{version: n.version, step: step}, n
		}
	},
	Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.kind {
		case linRead:
			return fmt.Sprintf("read() -> %s v%d secret=%v", out.status, out.version, out.secret)
		case linSync:
			return fmt.Sprintf("sync(%s, expected=%d, secret=%v) -> %s v%d conflict=%v refused=%v secret=%v",
				in.status, in.expected, in.secret, out.status, out.version, out.conflict, out.refused, out.secret)
		}
		return fmt.Sprintf("webhook(%s) -> %s v%d", in.status, out.step, out.version)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("%s v%d secret=%v", s.status, s.version, s.secret)
	},
}

// linClient drives one client's operations over HTTP and records them.
type linClient struct {
	api    *daemontest.Instance // Send only, from the clients' goroutines
	signer *svix.Webhook        // the standard provider's webhook secret
	store  store.Store          // read only, to explain a webhook that is not applied
	start  time.Time
}

func (c *linClient) now() int64 { return int64(time.Since(c.start)) }

// call sends one request and decodes the JSON answer.
func (c *linClient) call(method, path string, body []byte, hdr map[string]string) (int, map[string]any, error) {
	r, err := c.api.Send(method, path, body, hdr)
	switch {
	case err != nil:
		return 0, nil, err
	case r.JSON == nil:
		return r.Status, nil, fmt.Errorf("%s %s: %d %q: not a JSON object", method, path, r.Status, r.Body)
	case r.Status != 200:
		return r.Status, r.JSON, fmt.Errorf("%s %s: status %d: %s", method, path, r.Status, r.Body)
	}
	return r.Status, r.JSON, nil
}

// paymentOutput reads status, version and secret presence from a client view.
func paymentOutput(m map[string]any) linOutput {
	v, _ := m["version"].(float64)
	st, _ := m["status"].(string)
	conflict, _ := m["conflict"].(bool)
	_, secret := m["client_secret"]
	return linOutput{status: pay.Status(st), version: uint64(v), conflict: conflict, secret: secret}
}

func (c *linClient) read(id string) (porcupine.Operation, error) {
	call := c.now()
	_, m, err := c.call("GET", "/v1/payments/"+id, nil, nil)
	ret := c.now()
	if err != nil {
		return porcupine.Operation{}, err
	}
	return porcupine.Operation{Input: linInput{payment: id, kind: linRead}, Call: call, Output: paymentOutput(m), Return: ret}, nil
}

func (c *linClient) sync(id string, st pay.Status, expected uint64, secret bool) (porcupine.Operation, error) {
	body := map[string]any{"status": st}
	if expected != 0 {
		body["expected_version"] = expected
	}
	if secret {
		body["client_secret"] = "cs_" + id
	}
	b, _ := json.Marshal(body)
	call := c.now()
	status, m, err := c.call("POST", "/v1/payments/"+id+"/sync", b, nil)
	ret := c.now()
	in := linInput{payment: id, kind: linSync, status: st, expected: expected, secret: secret}
	if e, _ := m["error"].(map[string]any); status == 400 && e["param"] == "expected_version" {
		return porcupine.Operation{Input: in, Call: call, Output: linOutput{refused: true}, Return: ret}, nil
	}
	if err != nil {
		return porcupine.Operation{}, err
	}
	return porcupine.Operation{Input: in, Call: call, Output: paymentOutput(m), Return: ret}, nil
}

// webhook sends a signed event and polls the timeline until its step
// appears; the operation ends when the client has seen it.
func (c *linClient) webhook(id, eventID string, st pay.Status, typ string) (porcupine.Operation, error) {
	now := time.Now()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"currency":"EUR"}}`,
		eventID, typ, now.Unix(), id))
	sig, err := c.signer.Sign(eventID, now, body)
	if err != nil {
		return porcupine.Operation{}, err
	}
	hdr := map[string]string{
		"webhook-id": eventID, "webhook-timestamp": fmt.Sprint(now.Unix()), "webhook-signature": sig,
		"Authorization": "",
	}
	call := c.now()
	if _, _, err := c.call("POST", "/webhooks/standard", body, hdr); err != nil {
		return porcupine.Operation{}, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, m, err := c.call("GET", "/v1/payments/"+id+"/events", nil, nil)
		if err != nil {
			return porcupine.Operation{}, err
		}
		ret := c.now()
		steps, _ := m["data"].([]any)
		for _, s := range steps {
			step, _ := s.(map[string]any)
			if step["event_id"] != eventID {
				continue
			}
			kind, _ := step["kind"].(string)
			v, _ := step["version"].(float64)
			in := linInput{payment: id, kind: linWebhook, status: st}
			return porcupine.Operation{Input: in, Call: call, Output: linOutput{version: uint64(v), step: kind}, Return: ret}, nil
		}
		if time.Now().After(deadline) {
			var ev pay.InboxEvent
			err := c.store.View(context.Background(), func(tx store.Tx) error {
				var err error
				ev, err = tx.InboxEvent("standard", eventID)
				return err
			})
			return porcupine.Operation{}, fmt.Errorf("event %s of %s not applied after 30s: inbox record %+v (%v)", eventID, id, ev, err)
		}
		time.Sleep(5 * time.Millisecond) // poll interval of the wait, as waitFor
	}
}

// weighted picks from choices with the given weights.
func weighted[E any](r *rand.Rand, choices []E, weights []int) E {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := r.IntN(total)
	for i, w := range weights {
		if n < w {
			return choices[i]
		}
		n -= w
	}
	return choices[len(choices)-1]
}

var (
	// Reported statuses. In the first two thirds of a client's operations
	// only the non-terminal ones (the terminal weights count from then on),
	// so that histories race through the non-terminal part of the state
	// machine before they race over the terminal outcomes.
	linSyncStatuses = []pay.Status{pay.Created, pay.Processing, pay.RequiresAction, pay.FinalizePending, pay.Expired, pay.Captured, pay.Failed, pay.Refunded}
	linSyncWeights  = []int{2, 5, 5, 2, 3, 1, 1, 1}
	linHookTypes    = []string{"payment.processing", "payment.requires_action", "payment.captured", "payment.failed", "payment.refunded"}
	linHookStatuses = []pay.Status{pay.Processing, pay.RequiresAction, pay.Captured, pay.Failed, pay.Refunded}
	linHookWeights  = []int{4, 4, 1, 1, 1}
)

// linWeights returns weights with those of terminal statuses zeroed
// unless late is set.
func linWeights(statuses []pay.Status, weights []int, late bool) []int {
	out := make([]int, len(weights))
	for i, w := range weights {
		if late || !statuses[i].Terminal() {
			out[i] = w
		}
	}
	return out
}

// TestLinearizability_HTTP records thousands of concurrent operations
// against a running paystate and checks that the history is linearizable
// with respect to the state machine model.
func TestLinearizability_HTTP(t *testing.T) {
	t.Parallel()
	payments, clients, opsPerClient := 20, 4, 32 // 2560 operations
	if testing.Short() {
		payments, opsPerClient = 8, 16 // 512 operations
	}
	in := daemontest.Boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })
	tr := &http.Transport{MaxIdleConnsPerHost: payments * clients}
	t.Cleanup(tr.CloseIdleConnections)
	signer, err := svix.NewWebhook(in.Main.Config.Providers.Standard.WebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	lc := &linClient{
		api:    &daemontest.Instance{Base: in.Base, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}},
		signer: signer, store: in.Main.Store, start: time.Now(),
	}

	ids := make([]string, payments)
	for i := range ids {
		r := in.Create(fmt.Sprintf(`{"order_id":"lin-%d","amount":1500,"currency":"EUR"}`, i), fmt.Sprintf("lin-%d", i))
		if r.Status != 201 || r.Str("status") != "created" || r.Num("version") != 1 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		ids[i] = r.Str("id")
	}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		errs    []error
		wg      sync.WaitGroup
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// A few payments at a time: every client is a writer waiting for the
	// one bbolt writer, and a long queue only makes each operation slower.
	sem := make(chan struct{}, 6)
	for p, id := range ids {
		sem <- struct{}{}
		var pwg sync.WaitGroup
		pwg.Add(clients)
		go func() { pwg.Wait(); <-sem }()
		for c := range clients {
			clientID := p*clients + c
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer pwg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(clientID)))
				var seen uint64 = 1 // the version this client last saw
				for n := range opsPerClient {
					late := n >= opsPerClient*2/3
					var op porcupine.Operation
					var err error
					switch k := r.IntN(10); {
					case k < 3:
						op, err = lc.read(id)
					case k < 8:
						var expected uint64
						switch r.IntN(10) {
						case 0, 1, 2, 3, 4:
							expected = seen
						case 5:
							expected = 1 + r.Uint64N(seen+1)
						}
						st := weighted(r, linSyncStatuses, linWeights(linSyncStatuses, linSyncWeights, late))
						op, err = lc.sync(id, st, expected, r.IntN(2) == 0)
					default:
						i := weighted(r, []int{0, 1, 2, 3, 4}, linWeights(linHookStatuses, linHookWeights, late))
						op, err = lc.webhook(id, fmt.Sprintf("evt_lin_%d_%d", clientID, n), linHookStatuses[i], linHookTypes[i])
					}
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					op.ClientId = clientID
					history = append(history, op)
					mu.Unlock()
					if out := op.Output.(linOutput); out.status != "" {
						seen = out.version
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d operations failed, first: %v", len(errs), errs[0])
	}

	counts := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		switch in.kind {
		case linRead:
			counts["read"]++
		case linSync:
			counts["sync"]++
			if out.conflict {
				counts["sync conflict"]++
			}
			if out.refused {
				counts["sync refused"]++
			}
		case linWebhook:
			counts["webhook"]++
			counts["webhook "+out.step]++
		}
	}
	t.Logf("%d operations on %d payments by %d clients: %v", len(history), payments, payments*clients, counts)

	res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
	if res != porcupine.Ok {
		dir, err := os.MkdirTemp("", "paystate-linearizability-")
		if err == nil {
			path := filepath.Join(dir, "history.html")
			if err := porcupine.VisualizePath(linModel, info, path); err == nil {
				t.Logf("visualization: %s", path)
			}
		}
		t.Fatalf("history of %d operations is not linearizable: %s", len(history), res)
	}
}

// TestLinearizability_CheckerRejects shows that the model and the checker
// can fail: hand-made histories that break the state machine are rejected,
// and a correct one of the same shape is accepted.
func TestLinearizability_CheckerRejects(t *testing.T) {
	t.Parallel()
	const id = "pay_x"
	read := func(call, ret int64, st pay.Status, v uint64) porcupine.Operation {
		return porcupine.Operation{Input: linInput{payment: id, kind: linRead}, Call: call, Return: ret,
			Output: linOutput{status: st, version: v}}
	}
	sync := func(call, ret int64, obs pay.Status, expected uint64, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: linInput{payment: id, kind: linSync, status: obs, expected: expected}, Call: call, Return: ret, Output: out}
	}
	hook := func(call, ret int64, obs pay.Status, step string, v uint64) porcupine.Operation {
		return porcupine.Operation{Input: linInput{payment: id, kind: linWebhook, status: obs}, Call: call, Return: ret,
			Output: linOutput{step: step, version: v}}
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"OK", []porcupine.Operation{
			sync(0, 10, pay.Processing, 1, linOutput{status: pay.Processing, version: 2}),
			hook(5, 30, pay.Captured, pay.StepTransition, 3),
			read(12, 14, pay.Processing, 2),
			read(31, 32, pay.Captured, 3),
			sync(33, 40, pay.Processing, 2, linOutput{status: pay.Captured, version: 3, conflict: true}),
		}, true},
		{"StaleRead", []porcupine.Operation{
			sync(0, 10, pay.Processing, 0, linOutput{status: pay.Processing, version: 2}),
			read(11, 12, pay.Processing, 2),
			read(13, 14, pay.Created, 1), // an older version after a newer one was read
		}, false},
		{"LostUpdate", []porcupine.Operation{
			sync(0, 10, pay.Processing, 0, linOutput{status: pay.Processing, version: 2}),
			sync(11, 20, pay.RequiresAction, 0, linOutput{status: pay.RequiresAction, version: 2}), // version reused
		}, false},
		{"LeftTerminal", []porcupine.Operation{
			sync(0, 10, pay.Failed, 0, linOutput{status: pay.Failed, version: 2}),
			sync(11, 20, pay.Captured, 0, linOutput{status: pay.Captured, version: 3}),
		}, false},
		{"MissedConflict", []porcupine.Operation{
			sync(0, 10, pay.Processing, 0, linOutput{status: pay.Processing, version: 2}),
			sync(11, 20, pay.FinalizePending, 1, linOutput{status: pay.FinalizePending, version: 3}), // conflict not reported
		}, false},
		{"SecretWhenFinal", []porcupine.Operation{
			sync(0, 10, pay.Captured, 0, linOutput{status: pay.Captured, version: 2, secret: true}),
		}, false},
		{"WebhookAppliedTwice", []porcupine.Operation{
			hook(0, 10, pay.Processing, pay.StepTransition, 2),
			hook(11, 20, pay.Processing, pay.StepTransition, 3),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(linModel, tc.history); got != tc.want {
				t.Fatalf("CheckOperations=%v, want %v", got, tc.want)
			}
		})
	}
}
