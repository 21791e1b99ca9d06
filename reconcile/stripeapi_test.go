package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/reconcile"
)

// pager is a proxy in front of stripe-mock that records the balance
// transaction list requests and says the first page has more, so that
// stripe-go asks for the next page (stripe-mock's lists have one page).
type pager struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []url.Values
}

func newPager(t *testing.T, target string) *pager {
	p := &pager{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if r.URL.Path == "/v1/balance_transactions" {
			p.mu.Lock()
			p.reqs = append(p.reqs, r.URL.Query())
			first := len(p.reqs) == 1
			p.mu.Unlock()
			if first && res.StatusCode == http.StatusOK {
				var list map[string]any
				if err := json.Unmarshal(body, &list); err == nil {
					list["has_more"] = true
					body, _ = json.Marshal(list)
				}
			}
		}
		w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func TestStripe_Lines(t *testing.T) {
	t.Parallel()
	p := newPager(t, stripetest.MockURL(t))
	since := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	lines, err := reconcile.Stripe{SecretKey: "sk_test_123", APIBase: p.srv.URL}.Lines(context.Background(), since)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	reqs := append([]url.Values(nil), p.reqs...)
	p.mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("%d list requests, want 2 (two pages): %v", len(reqs), reqs)
	}
	for i, q := range reqs {
		if q.Get("limit") != "100" || q.Get("created[gte]") != strconv.FormatInt(since.Unix(), 10) || q.Get("expand[0]") != "data.source" {
			t.Errorf("request %d: %v, want limit=100, created[gte], expand data.source", i, q)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one a page", len(lines))
	}
	if after := reqs[1].Get("starting_after"); after == "" || after != lines[0].ID {
		t.Errorf("second page starting_after=%q, want the first page's last id %q", after, lines[0].ID)
	}
	l := lines[0]
	if l.ID == "" || len(l.Currency) != 3 || l.Category == "" {
		t.Errorf("line %+v: want an id, a currency and a category from the fixture", l)
	}
}

func TestStripe_NoKey(t *testing.T) {
	t.Parallel()
	_, err := reconcile.Stripe{}.Lines(context.Background(), time.Now())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("secret key")) {
		t.Fatalf("Lines without a key=%v, want an error naming the secret key", err)
	}
}
