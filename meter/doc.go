// Package meter is the metering proxy that every model call of a scenario goes
// through: an OpenAI-compatible endpoint (a subset of the chat API) that enforces
// the task's model allowlist and per-scenario spending cap, prices each call from
// the task's frozen price table in integer micro-USD, forwards it to the model's
// upstream with bounded retries, and records a receipt and a trace entry for it.
//
// The model:
//
//   - A Meter is built from the task's Config (allowlist, prices, cap, upstreams,
//     timeouts, retry policy) and Options (the recorder, an upstream override, the
//     replay source). It serves http.Handler on a Unix socket or a loopback address.
//   - Every call is attributed to a Scenario, which owns a budget. A call first
//     reserves its worst-case cost (the meter's own token count of the request
//     plus its max_tokens); a call whose reservation does not fit in what remains
//     is refused before anything is forwarded, so concurrent calls can never spend
//     past the cap. After the upstream answers, the reservation settles to the
//     cost of the reported usage, never more than was reserved.
//   - A Recorder keeps, per scenario and in call order, one Receipt per call and
//     one TraceEntry per call (request and upstream response bodies, a streamed
//     answer as its chunks). Latencies are kept apart (Timing), outside anything a
//     verdict depends on. WriteArtifacts stores receipts and trace as signed
//     artifacts of kinds "receipts" and "trace".
//   - In replay mode (Options.Replay) no upstream is contacted: each forwarded
//     request is answered from the trace, keyed by (scenario, canonical request
//     digest, occurrence). A request the trace lacks is a Divergence.
//
// Upstream failures (HTTP 402, 429, 5xx, connection resets, timeouts) are retried
// with exponential backoff up to the policy's bound; a call that still fails is an
// upstream_error receipt and makes its scenario infra_error (Summary.Status).
//
// docs/METER.md specifies the API subset, the token count, the cap rule and the
// receipt and trace formats.
package meter
