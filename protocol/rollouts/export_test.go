package rollouts

// ParseItem exposes the single-pass tasks.jsonl line parser to the tests.
var ParseItem = parseItem
