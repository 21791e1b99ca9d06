package bolt

// The archived webhook bodies (inbox, field 19). A body is stored packed:
// the ids its record holds anyway (the event id, the payment id and the
// provider's reference: bodyRefs) are replaced by two-byte marks, and the
// result is a zstd frame made with a dictionary of the bodies paystate's
// providers send, so that the field names and structure every body
// repeats cost a few bytes. A body the frame does not make smaller, or one
// that holds a NUL byte (no JSON text does), which a mark could not be
// told from, is kept as it came (field 12).

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// bodyDict1 is dictionary 1: webhook bodies as Stripe (pretty-printed) and
// Standard Webhooks senders (compact, as psp/mock sends them) send them,
// the commonest last. A stored frame names its dictionary by id, so this
// file must never change: a new dictionary gets a new file and id, and
// the decoder keeps every old one (TestBodyDict_Unchanged).
//
//go:embed bodydict/1.txt
var bodyDict1 []byte

// bodyDict1SHA256 is the SHA-256 of bodyDict1 as first released.
const bodyDict1SHA256 = "73b850aaa02c7ff5a80d4815a2963dd03da3b6797e8a3ec71a01391bc986f1ae"

// bodyDictID is the dictionary new frames are made with.
const bodyDictID = 1

// bodyWindow is the encoder's window: the dictionary (16 KiB) and the
// start of a body fit in it.
const bodyWindow = 32 << 10

// maxBodyFrame bounds what one stored frame may decompress to, so that a
// damaged frame cannot ask for unbounded memory; webhook bodies are far
// smaller (server.max_body).
const maxBodyFrame = 64 << 20

// bodyCodec returns the encoder and decoder of the frames, made once;
// both are safe for concurrent use (EncodeAll, DecodeAll).
var bodyCodec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	if sum := sha256.Sum256(bodyDict1); hex.EncodeToString(sum[:]) != bodyDict1SHA256 {
		panic("store: bodydict/1.txt changed; stored bodies need it as it was")
	}
	// One encoder (the writer packs, one transaction at a time) with a
	// window of 32 KiB, which holds the dictionary and a body: 0.7 MiB of
	// heap instead of the 5 MiB of the fastest level's default window.
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(bodyWindow),
		zstd.WithEncoderDictRaw(bodyDictID, bodyDict1))
	if err != nil {
		panic(fmt.Sprintf("store: body encoder: %v", err))
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(2), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(maxBodyFrame),
		zstd.WithDecoderDictRaw(bodyDictID, bodyDict1))
	if err != nil {
		panic(fmt.Sprintf("store: body decoder: %v", err))
	}
	return enc, dec
})

// bodyRefs are the strings of a record that a packed body refers to by
// mark, a NUL byte and the string's number (1, 2, 3): its event id,
// payment id and provider reference. None of them changes once the event
// is stored (PutInbox writes them, DeferInbox and MarkProcessed copy
// them), which is what lets unpackBody put them back. An empty string is
// not referred to. The body holds no NUL byte, and markRefs reads it once
// from the start, so a mark is never read as part of the body.
type bodyRefs struct{ event, payment, ref string }

// list returns the strings marks may refer to by their number, longest
// first: where several begin at one place, markRefs replaces the longest.
func (b bodyRefs) list() []bodyRef {
	all := []bodyRef{{1, b.event}, {2, b.payment}, {3, b.ref}}
	var out []bodyRef
	for _, r := range all {
		if r.s != "" {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].s) > len(out[j].s) })
	return out
}

// bodyRef is a string a mark refers to, and its number.
type bodyRef struct {
	n byte
	s string
}

// packBody returns body as a frame, its refs replaced by marks, or nil if
// it holds a NUL byte or the frame would not be smaller than the body.
func packBody(body []byte, refs bodyRefs) []byte {
	if len(body) == 0 || bytes.IndexByte(body, 0) >= 0 {
		return nil
	}
	marked := markRefs(body, refs)
	enc, _ := bodyCodec()
	z := enc.EncodeAll(marked, make([]byte, 0, len(marked)))
	if len(z) >= len(body) {
		return nil
	}
	return z
}

// unpackBody returns the body a frame of packBody holds, its marks
// replaced by refs.
func unpackBody(z []byte, refs bodyRefs) ([]byte, error) {
	_, dec := bodyCodec()
	marked, err := dec.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook body: %w", err)
	}
	return unmarkRefs(marked, refs)
}

// markRefs replaces refs in body, which holds no NUL byte, by their marks,
// in one pass from the start: where several begin, the longest.
func markRefs(body []byte, refs bodyRefs) []byte {
	list := refs.list()
	if len(list) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		r, ok := refAt(body[i:], list)
		if !ok {
			out = append(out, body[i])
			i++
			continue
		}
		out = append(out, 0, r.n)
		i += len(r.s)
	}
	return out
}

// refAt returns the first ref of list, longest first, that b begins with.
func refAt(b []byte, list []bodyRef) (bodyRef, bool) {
	for _, r := range list {
		if len(b) >= len(r.s) && b[0] == r.s[0] && string(b[:len(r.s)]) == r.s {
			return r, true
		}
	}
	return bodyRef{}, false
}

// unmarkRefs replaces the marks in marked by the refs they refer to.
func unmarkRefs(marked []byte, refs bodyRefs) ([]byte, error) {
	if bytes.IndexByte(marked, 0) < 0 {
		return marked, nil
	}
	list := refs.list()
	body := make([]byte, 0, len(marked)+64)
	for {
		i := bytes.IndexByte(marked, 0)
		if i < 0 {
			return append(body, marked...), nil
		}
		body = append(body, marked[:i]...)
		var s string
		for _, r := range list {
			if i+1 < len(marked) && r.n == marked[i+1] {
				s = r.s
			}
		}
		if s == "" {
			return nil, fmt.Errorf("webhook body: a mark at byte %d refers to nothing", i)
		}
		body = append(body, s...)
		marked = marked[i+2:]
	}
}
