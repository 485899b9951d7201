// Package web is feval's read-only web viewer: the rounds of a store, each
// round's leaderboard (one row per miner, one column per validator), the
// evidence behind every verdict, the optimizer frontier and any artifact by
// digest. Every page is HTML rendered on the server from embedded templates
// (no script, no external resource, so it works offline and without
// JavaScript), and the same data is served as JSON under /api at a stable
// path.
//
// The viewer never writes to what it shows and trusts nothing it reads:
// records come from the store through the verifying readers of package cas
// and bundle, every string from a record is escaped by html/template, charts
// are SVG drawn on the server from integers and exact rationals, and the
// responses carry a Content Security Policy that allows no script at all.
// Signatures are reported as [bundle.CheckSignatures] finds them against the
// keys the caller trusts; a record's claims about itself are shown as claims.
//
// Routes (GET and HEAD only):
//
//	/                          -> /rounds
//	/rounds                    /api/rounds
//	/rounds/{round}            /api/rounds/{round}        leaderboard; ?consensus=, ?carry_from=
//	/verdicts/{verdict}        /api/verdicts/{verdict}    evidence
//	/verdicts/{verdict}/replay /api/verdicts/{verdict}/replay
//	/frontier                  /api/frontier              ?at= seconds since launch
//	/artifacts/{digest}        /api/artifacts/{digest}
//
// {round}, {verdict} and {digest} are full digests (sha256:<64 hex>); pages
// link to each other only by full digest.
package web
