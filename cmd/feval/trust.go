package main

import (
	"github.com/feval/feval/bundle"
	"github.com/urfave/cli/v2"
)

// inputTrustFlags is the --pub flag of commands that read signed inputs
// (stake tables, rules) besides writing their own: the keys named there are
// trusted in addition to the caller's signing key. It does not read
// FEVAL_PUB: keys trusted to sign verdicts are not thereby trusted to set
// stakes.
func inputTrustFlags() []cli.Flag {
	return []cli.Flag{&cli.StringSliceFlag{Name: "pub", Aliases: []string{"trust"},
		Usage: "public key file trusted to sign stakes and rules artifacts, besides your own key (repeatable; the round owner's, for one)"}}
}

// renderSkipped lists the signatures that did not count, one line each.
func renderSkipped(w *tabw, skipped []bundle.SignatureCheck) {
	for _, s := range skipped {
		who := ""
		switch {
		case s.Signer != "":
			who = " by " + fingerprints([]string{s.Signer})
		case s.Claimed != "":
			who = " claiming " + fingerprints([]string{s.Claimed})
		}
		w.line("skipped signature %s%s: %s", s.Signature, who, s.Reason)
	}
}
