// Package hmacspec is the declarative engine of the HMAC family: each
// provider whose scheme differs from the others only in data — the
// signature header and how it is written (one signature, a list, key=value
// pairs, a leading timestamp), the hash (SHA-1, SHA-256, SHA-512), the
// encoding (hex, base64) and prefix, what is signed (a template over
// {body}, {timestamp}, {id}, {method} and {url}), where the timestamp is and
// its unit, and where the event id, type and time are — is one Spec in
// Specs, and one engine (New) verifies, signs, resolves and describes them
// all. Token and HTTP Basic schemes, which sign nothing, are Specs too.
//
// # Adding a provider
//
// Adding a provider of the family is one entry in Specs (table.go) plus its
// oracle tests: its documented formula, recomputed with crypto/hmac without
// the engine (formulas in oracle_test.go), and the strongest check
// available: the provider's official Go SDK as a test-only dependency where
// the module proxy serves one, its official Node.js SDK's recorded vectors
// (providers/testdata/sdkvectors, replayed by providers/all), or a test
// vector the provider published, recomputed (published_test.go, with the
// source and the date it was read); docs/providers.md says which each
// entry has. Validate
// refuses inconsistent entries; the package's tests then run every entry
// through the conformance suite (providertest) under its registered name,
// fuzz its header parser and verifier, and check its example resolves as
// the entry says. Schemes that need code (handshakes, signatures in the
// body, asymmetric keys) are packages of their own, which may still run
// their MAC on the engine through NewVerifier (providers/zoom, twitch,
// meta).
//
// # Cost
//
// Verify allocates nothing for a delivery it accepts: signatures are
// decoded into, and the HMACs computed with, pooled per-Verifier state
// (one HMAC keyed with each secret, reset per call), and header names are
// canonicalised once. BenchmarkEngineVsHandwritten in providers compares an
// engine entry with the hand-written adapter of the same scheme.
package hmacspec
