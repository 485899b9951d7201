// Package schemas holds the JSON Schemas of feval's records (FORMAT.md §7.6).
// They are embedded so that the documents are what feval checks records
// against: reading a verdict for consensus applies every rule its schema states
// (CONSENSUS.md §8.2).
package schemas

import "embed"

// FS holds every *.json file of this directory.
//
//go:embed *.json
var FS embed.FS
