package bolt

// The state of the ripple effects: customer accounts (customers), effect
// dedupe records (effects) and merchant webhook endpoints
// (webhook_endpoints). None has an index.

import "github.com/paystate/paystate/pay"

// CustomerAccount returns a customer's account, or ENOTFOUND.
func (t *tx) CustomerAccount(id string) (pay.CustomerAccount, error) {
	if err := checkPart("customer id", id, true); err != nil {
		return pay.CustomerAccount{}, err
	}
	var r customerRecord
	if found, err := t.getRecord(bucketCustomers, []byte(id), &r); err != nil {
		return pay.CustomerAccount{}, err
	} else if !found {
		return pay.CustomerAccount{}, pay.Errorf(pay.ENOTFOUND, "customer %s not found", id)
	}
	return pay.CustomerAccount{ID: id, Points: r.Points, LastVisitAt: r.LastVisitAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// PutCustomerAccount stores c under c.ID; UpdatedAt becomes Tx.Now.
func (t *tx) PutCustomerAccount(c pay.CustomerAccount) error {
	if err := checkPart("customer id", c.ID, true); err != nil {
		return err
	}
	return t.putRecord(bucketCustomers, []byte(c.ID), customerRecord{Points: c.Points, LastVisitAt: at(c.LastVisitAt), UpdatedAt: at(t.now)})
}

// Effect returns the record of a dedupe key and whether there is one.
func (t *tx) Effect(key string) (pay.EffectRecord, bool, error) {
	if err := checkPart("effect key", key, true); err != nil {
		return pay.EffectRecord{}, false, err
	}
	var r effectRecord
	found, err := t.getRecord(bucketEffects, effectKey(key), &r)
	if err != nil || !found {
		return pay.EffectRecord{}, false, err
	}
	return pay.EffectRecord{Key: key, DeliveryID: string(r.DeliveryID), Points: r.Points, At: r.At.UTC()}, true, nil
}

// ClaimEffect stores r unless its key has a record, and reports whether
// it did. The single writer orders claims of one key.
func (t *tx) ClaimEffect(r pay.EffectRecord) (bool, error) {
	if _, done, err := t.Effect(r.Key); err != nil || done {
		return false, err
	}
	return true, t.PutEffect(r)
}

// PutEffect stores r under r.Key, replacing any record there; a zero At
// becomes Tx.Now.
func (t *tx) PutEffect(r pay.EffectRecord) error {
	if err := checkPart("effect key", r.Key, true); err != nil {
		return err
	}
	if r.At.IsZero() {
		r.At = t.now
	}
	return t.putRecord(bucketEffects, effectKey(r.Key), effectRecord{DeliveryID: ident(r.DeliveryID), Points: r.Points, At: at(r.At)})
}

// WebhookEndpoint returns an endpoint's stored state; an endpoint never
// stored is enabled, with only its ID set, and no error.
func (t *tx) WebhookEndpoint(id string) (pay.WebhookEndpoint, error) {
	if err := checkPart("endpoint id", id, true); err != nil {
		return pay.WebhookEndpoint{}, err
	}
	var r endpointRecord
	if _, err := t.getRecord(bucketWebhookEndpoints, []byte(id), &r); err != nil {
		return pay.WebhookEndpoint{}, err
	}
	return pay.WebhookEndpoint{
		ID: id, URL: r.URL, Disabled: r.Disabled, DisabledAt: r.DisabledAt.UTC(), DisabledReason: r.DisabledReason,
		FailingSince: r.FailingSince.UTC(), LastSuccessAt: r.LastSuccessAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}, nil
}

// PutWebhookEndpoint stores e under e.ID; UpdatedAt becomes Tx.Now.
func (t *tx) PutWebhookEndpoint(e pay.WebhookEndpoint) error {
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
