// Package protocol holds what every competition kind shares: tasks, rounds, the
// miner's salted commitment and its reveal, the validator's first-seen clock, and
// the reveal checks that decide whether a revealed submission may be evaluated.
//
// A commitment binds, under the domain tag "feval/commitment/v1", the submission
// manifest digest, the miner's public-key fingerprint, the round digest and a
// 32-byte secret salt. The commitment artifact carries only that hash, the round
// and the miner's public key; the salt stays in the miner's store until the reveal.
// docs/PROTOCOL.md specifies the construction and every check.
package protocol
