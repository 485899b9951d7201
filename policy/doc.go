// Package policy is the policy sidecar: the OpenAI-compatible chat endpoint
// an agent talks to in a scenario evaluation, which runs a pack's fusion
// policy for every request and whose only route out is the meter.
//
// The model:
//
//   - A Pack is a scenario pack read and gated from a directory (LoadPack): a
//     SKILL.md and one policy form, policy.json (interpreted here in Go; no
//     miner code runs), policy.py (run inside the sandbox on the Python SDK
//     feval ships, package directory sdk) or a raw server (the pack's own
//     program serving the OpenAI API inside the sandbox).
//   - Start returns a Sidecar for one scenario: every model call the policy
//     makes is a call of that meter.Scenario, so it is charged to the
//     scenario, priced, capped and recorded whatever the policy does. A
//     sandboxed policy reaches the meter only through a Unix socket bound into
//     its sandbox (the sidecar's outbound gate), which admits calls only while
//     an agent request is being answered and at most Limits.CallsPerRequest of
//     them per request.
//   - The sidecar answers the agent's requests one at a time, in arrival
//     order; each gets a Request record (route, meter sequence numbers of its
//     calls, outcome). A policy that raises, hangs past its time limit, floods
//     calls, dies or answers something that is not an OpenAI chat completion
//     gives that request an OpenAI-shaped error (type "policy_error") and a
//     Failure record; the sidecar keeps serving later requests, restarting a
//     sandboxed policy that died or hung.
//
// docs/POLICY.md specifies the contract, the policy.json schema
// (feval.policy.v1), the Python SDK and the server form.
package policy
