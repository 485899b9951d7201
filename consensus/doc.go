// Package consensus gathers the signed verdicts of one round and turns them,
// deterministically, into a signed consensus record that anyone can re-derive.
//
// The model. A round's entries are its reveals: every reveal that answers one of
// the round's commitments, opens it (the salt and submission hash to the
// commitment value) and is signed, like its commitment, by the committing
// miner's key. Each entry names a submission and a miner. The unit of consensus
// is the entry, not the submission digest alone, because two miners can reveal
// the same submission (a copy) and must not share or overwrite each other's
// votes.
//
// Votes are the verdicts found in the store as referrers of the entries'
// submissions (and of the reveals, for submissions that never arrived), with
// artifactType application/vnd.feval.verdict.v1+json. A verdict counts once for
// every key that validly signed it (each signature is checked against the key it
// carries, see [bundle.Signers]); a verdict without signature is excluded as
// unsigned, one whose signatures all fail as bad_signature. A signed verdict
// that cannot be read as a verdict is malformed; one about another round,
// another reveal or another submission than its reveal names is stale. The
// remaining rules (unknown validator, zero stake, duplicates by the validator's
// own sequence number, infra_error, undetermined) are those of
// [scoring.Aggregate], which computes the stake-weighted Winsorized consensus.
// A passed verdict votes its claimed score; a rejected verdict votes 0.
//
// The record (kind "consensus", subject: the round) holds the digest of every
// input (the round, its reveals, every verdict considered with the signature
// artifacts that were checked, the stake table and the rules artifacts, the
// incumbent), the consensus per entry, the seat decision ([scoring.Seat]), a
// normalized u16 weight vector over miners, and every excluded vote with its
// reason. It holds no time, host or path, so [Replay] re-derives it byte for byte
// from the recorded inputs alone. docs/CONSENSUS.md specifies the format.
//
// The library never prints and never reads flags, files or the environment:
// callers pass bytes and store handles in.
package consensus
