package httpd_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

// TestServer_ReconRuns: the runs a reconciliation stored are listed
// newest first with a cursor, and one run is answered with its unmatched
// lines, behind the API key.
func TestServer_ReconRuns(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	ctx := context.Background()
	lines, err := reconcile.ReadGeneric(strings.NewReader("id,provider_ref,type,amount,fee,currency\n" +
		"txn_ghost,pi_ghost,charge,70.00,1.30,EUR\ntxn_fee,,fee,0,2.50,EUR\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Run ids are ULIDs of the engine's clock: a millisecond apart, the
	// second sorts after the first whatever other tests of the process
	// made in between (ULIDs of one millisecond are ordered only while no
	// other millisecond's come between them).
	at := time.Now()
	eng := &reconcile.Engine{Store: in.Main.Store, Now: func() time.Time { at = at.Add(time.Millisecond); return at }}
	var ids []string
	for range 2 {
		run, err := eng.Run(ctx, "mock", "import:generic:test.csv", lines)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}

	var list struct {
		Data []struct {
			ID             string `json:"id"`
			Lines          int    `json:"lines"`
			Matched        int    `json:"matched"`
			MissingLocally int    `json:"missing_locally"`
			OK             bool   `json:"ok"`
			Items          []any  `json:"items"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	if st := in.DoJSON("GET", "/v1/reconciliation/runs?limit=1", nil, nil, &list); st != http.StatusOK {
		t.Fatalf("list: status %d", st)
	}
	if len(list.Data) != 1 || list.Data[0].ID != ids[1] || list.NextCursor != ids[1] || list.Data[0].Lines != 2 ||
		list.Data[0].Matched != 1 || list.Data[0].MissingLocally != 1 || list.Data[0].OK || list.Data[0].Items != nil {
		t.Fatalf("first page=%+v, want the newest run without its items and a cursor", list)
	}
	list.Data, list.NextCursor = nil, ""
	if st := in.DoJSON("GET", "/v1/reconciliation/runs?limit=1&cursor="+ids[1], nil, nil, &list); st != http.StatusOK || len(list.Data) != 1 || list.Data[0].ID != ids[0] {
		t.Fatalf("second page: status %d, %+v; want the older run", st, list)
	}

	r := in.Do("GET", "/v1/reconciliation/runs/"+ids[0], nil, nil)
	items, _ := r.JSON["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 {
		t.Fatalf("run: status %d, %s; want one item", r.Status, r.Body)
	}
	it, _ := items[0].(map[string]any)
	if it["kind"] != pay.ReconMissingLocally || it["line_id"] != "txn_ghost" || it["line"] != float64(2) || it["amount"] != float64(7000) {
		t.Fatalf("item=%v, want txn_ghost missing_locally on line 2", it)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs/rr_nope", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("unknown run: status %d, want 404", r.Status)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs", nil, map[string]string{"Authorization": ""}); r.Status != http.StatusUnauthorized {
		t.Fatalf("without the key: status %d, want 401", r.Status)
	}
	if r := in.Do("GET", "/v1/reconciliation/runs?limit=0", nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("limit=0: status %d, want 400", r.Status)
	}
}
