package bolt

// The review queue: review items (review) in order of creation
// (review_by_created).

import (
	"fmt"

	"github.com/paystate/paystate/pay"
)

// PutReview adds or replaces a review item. A zero CreatedAt keeps the
// stored item's time, or becomes Tx.Now for a new item.
func (t *tx) PutReview(item pay.ReviewItem) error {
	if err := checkPart("review id", item.ID, true); err != nil {
		return err
	}
	var old reviewRecord
	found, err := t.getRecord(bucketReview, []byte(item.ID), &old)
	if err != nil {
		return err
	}
	if item.CreatedAt.IsZero() {
		item.CreatedAt = t.now
		if found {
			item.CreatedAt = old.CreatedAt.Time
		}
	}
	r := fromReview(item)
	if found {
		if err := t.del(bucketReviewByCreated, reviewKey(old.CreatedAt.Time, old.ID)); err != nil {
			return err
		}
	}
	if err := t.putRecord(bucketReview, []byte(r.ID), r); err != nil {
		return err
	}
	return t.put(bucketReviewByCreated, reviewKey(r.CreatedAt.Time, r.ID), nil)
}

// Review returns one review item, or ENOTFOUND.
func (t *tx) Review(id string) (pay.ReviewItem, error) {
	var r reviewRecord
	if err := t.getFound(bucketReview, []byte(id), &r, "review item %s not found", id); err != nil {
		return pay.ReviewItem{}, err
	}
	return r.item(), nil
}

// ListReview returns every review item, oldest CreatedAt first (ties by
// id), through review_by_created.
func (t *tx) ListReview() ([]pay.ReviewItem, error) {
	var out []pay.ReviewItem
	err := t.bucket(bucketReviewByCreated).ForEach(func(k, _ []byte) error {
		_, id, ok := splitTimeID(k, 0)
		if !ok {
			return corrupt(bucketReviewByCreated, "key %x", k)
		}
		var r reviewRecord
		if found, err := t.getRecord(bucketReview, []byte(id), &r); err != nil {
			return err
		} else if !found {
			return corrupt(bucketReviewByCreated, "key %x points to missing item %s", k, id)
		}
		out = append(out, r.item())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteReview removes a review item; ENOTFOUND if there is none.
func (t *tx) DeleteReview(id string) error {
	var r reviewRecord
	if err := t.getFound(bucketReview, []byte(id), &r, "review item %s not found", id); err != nil {
		return err
	}
	if err := t.del(bucketReviewByCreated, reviewKey(r.CreatedAt.Time, r.ID)); err != nil {
		return err
	}
	return t.del(bucketReview, []byte(id))
}

// checkReview reports review items without their time index entry, and
// entries without an item.
func (c *checker) checkReview() {
	var nReview int
	_ = c.bucket(bucketReview).ForEach(func(k, v []byte) error {
		nReview++
		var r reviewRecord
		if err := decodeAt("review item", k, v, &r); err != nil {
			c.report(fmt.Errorf("review item %s: %w", k, err))
			return nil
		}
		c.want(bucketReviewByCreated, reviewKey(r.CreatedAt.Time, r.ID), "review item "+r.ID)
		return nil
	})
	c.wantCount(bucketReviewByCreated, nReview, "items")
}
