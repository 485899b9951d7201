package scenarios

import "context"

// RunVerifier runs the verifier of the task in taskDir on scenario sc's hidden
// tests (taskDir/scenarios/NAME/hidden) and the workspace ws: the report, or
// why the scenario is infra_error, and the control run's finding, if any.
func RunVerifier(ctx context.Context, spec Spec, taskDir string, sc ScenarioSpec, ws string) (r *Report, infra, control string) {
	return verify(ctx, spec, taskDir, sc, ws)
}

// SetVerifierGrace sets the verifier's wall time beyond the task's for one
// test (not parallel) and returns the function that restores it.
func SetVerifierGrace(millis int64) (restore func()) {
	old := verifierGraceMillis
	verifierGraceMillis = millis
	return func() { verifierGraceMillis = old }
}
