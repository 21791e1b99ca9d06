package bolt

// The state of the ripple effects: customer accounts (customers), effect
// dedupe records (effects) and merchant webhook endpoints
// (webhook_endpoints). None has an index.

import (
	"github.com/paystate/paystate/store"
)

// CustomerAccount returns a customer's account, or ENOTFOUND.
func (t *tx) CustomerAccount(id string) (store.CustomerAccount, error) {
	if err := checkPart("customer id", id, true); err != nil {
		return store.CustomerAccount{}, err
	}
	var r customerRecord
	if err := t.getFound(bucketCustomers, []byte(id), &r, "customer %s not found", id); err != nil {
		return store.CustomerAccount{}, err
	}
	return store.CustomerAccount{ID: id, Points: r.Points, LastVisitAt: r.LastVisitAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// PutCustomerAccount stores c under c.ID; UpdatedAt becomes Tx.Now.
func (t *tx) PutCustomerAccount(c store.CustomerAccount) error {
	if err := checkPart("customer id", c.ID, true); err != nil {
		return err
	}
	return t.putRecord(bucketCustomers, []byte(c.ID), customerRecord{Points: c.Points, LastVisitAt: at(c.LastVisitAt), UpdatedAt: at(t.now)})
}

// Effect returns the record of a dedupe key and whether there is one.
func (t *tx) Effect(key string) (store.EffectRecord, bool, error) {
	if err := checkPart("effect key", key, true); err != nil {
		return store.EffectRecord{}, false, err
	}
	var r effectRecord
	found, err := t.getRecord(bucketEffects, effectKey(key), &r)
	if err != nil || !found {
		return store.EffectRecord{}, false, err
	}
	return store.EffectRecord{Key: key, DeliveryID: string(r.DeliveryID), Points: r.Points, At: r.At.UTC()}, true, nil
}

// LockEffects does nothing: the one writer holds every record.
func (t *tx) LockEffects([]string) error { return nil }

// ClaimEffect stores r unless its key has a record, and reports whether
// it did. The single writer orders claims of one key.
func (t *tx) ClaimEffect(r store.EffectRecord) (bool, error) {
	if _, done, err := t.Effect(r.Key); err != nil || done {
		return false, err
	}
	return true, t.PutEffect(r)
}

// PutEffect stores r under r.Key, replacing any record there; a zero At
// becomes Tx.Now.
func (t *tx) PutEffect(r store.EffectRecord) error {
	if err := checkPart("effect key", r.Key, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &r.At)
	return t.putRecord(bucketEffects, effectKey(r.Key), effectRecord{DeliveryID: ident(r.DeliveryID), Points: r.Points, At: at(r.At)})
}

// WebhookEndpoint returns an endpoint's stored state; an endpoint never
// stored is enabled, with only its ID set, and no error.
func (t *tx) WebhookEndpoint(id string) (store.WebhookEndpoint, error) {
	if err := checkPart("endpoint id", id, true); err != nil {
		return store.WebhookEndpoint{}, err
	}
	var r endpointRecord
	if _, err := t.getRecord(bucketWebhookEndpoints, []byte(id), &r); err != nil {
		return store.WebhookEndpoint{}, err
	}
	return store.WebhookEndpoint{
		ID: id, URL: r.URL, Disabled: r.Disabled, DisabledAt: r.DisabledAt.UTC(), DisabledReason: r.DisabledReason,
		FailingSince: r.FailingSince.UTC(), LastSuccessAt: r.LastSuccessAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}, nil
}

// PutWebhookEndpoint stores e under e.ID; UpdatedAt becomes Tx.Now.
func (t *tx) PutWebhookEndpoint(e store.WebhookEndpoint) error {
	if err := checkPart("endpoint id", e.ID, true); err != nil {
		return err
	}
	return t.putRecord(bucketWebhookEndpoints, []byte(e.ID), endpointRecord{
		URL: e.URL, Disabled: e.Disabled, DisabledAt: at(e.DisabledAt), DisabledReason: e.DisabledReason,
		FailingSince: at(e.FailingSince), LastSuccessAt: at(e.LastSuccessAt), UpdatedAt: at(t.now),
	})
}

// checkEffects reports customer accounts, effect records and endpoint
// states that do not decode.
func (c *checker) checkEffects() {
	c.decodeEach(bucketCustomers, &customerRecord{})
	c.decodeEach(bucketEffects, &effectRecord{})
	c.decodeEach(bucketWebhookEndpoints, &endpointRecord{})
}
