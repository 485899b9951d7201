package ifeval

import "testing"

// OracleResult and RunOracle give the external tests the NLTK oracle.
type OracleResult = oracleResult

func RunOracle(t *testing.T, texts []string) []OracleResult { return runOracle(t, texts) }
