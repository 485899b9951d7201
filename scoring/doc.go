// Package scoring holds the pure, deterministic functions that turn verdicts into
// decisions: the stake-weighted Winsorized consensus of validators' scores, the seat
// rule, the optimizer frontier, the emission split and the leaderboard matrix.
//
// Every function here is a pure function of its arguments. The package does no I/O,
// reads no clock, draws no random numbers and never depends on map iteration order:
// the same inputs give the same outputs, byte for byte once encoded, on every
// machine and in every input order. Callers read and verify signed records
// elsewhere and pass plain Go values in; scoring never parses a verdict and never
// checks a signature.
//
// Arithmetic is exact. Scores, fractions and weights are rationals ([Ratio], written
// in JSON as canonical strings such as "7/20"); losses and improvements are integers
// in micro-nats; times are integers in seconds. The one irrational quantity, the
// decay factor 2^(-t/half-life) of emission credits, is rounded to the nearest
// multiple of 2^-64 by a rule that any implementation can reproduce exactly.
// docs/CONSENSUS.md specifies every formula, default and rounding rule.
package scoring
