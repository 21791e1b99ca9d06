package store

// The archived webhook bodies (inbox, field 19): zstd frames made with a
// dictionary of the bodies paystate's providers send, so that the
// field names and structure every body repeats cost a few bytes. A body
// the dictionary does not help is kept as it came (field 12).

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
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

// maxBodyFrame bounds what one stored frame may decompress to, so that a
// damaged frame cannot ask for unbounded memory; webhook bodies are far
// smaller (server.max_body).
const maxBodyFrame = 64 << 20

var bodyCodec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	if sum := sha256.Sum256(bodyDict1); hex.EncodeToString(sum[:]) != bodyDict1SHA256 {
		panic("store: bodydict/1.txt changed; stored bodies need it as it was")
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(2), zstd.WithLowerEncoderMem(true),
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

// packBody returns body as a frame, or nil if the frame would not be
// smaller than the body.
func packBody(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	enc, _ := bodyCodec()
	z := enc.EncodeAll(body, make([]byte, 0, len(body)))
	if len(z) >= len(body) {
		return nil
	}
	return z
}

// unpackBody returns the body a frame of packBody holds.
func unpackBody(z []byte) ([]byte, error) {
	_, dec := bodyCodec()
	body, err := dec.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook body: %w", err)
	}
	return body, nil
}
