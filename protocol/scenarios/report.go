package scenarios

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// maxReportBytes bounds a verifier's JUnit report.
const maxReportBytes = 4 << 20

// Test statuses of a Report (CTRF's names).
const (
	TestPassed  = "passed"
	TestFailed  = "failed"
	TestSkipped = "skipped"
	// TestOther: the test is declared by the task but absent from the report
	// (its module failed to import, for instance), or reported twice.
	TestOther = "other"
)

// Report is a verifier's result for one scenario, shaped like a CTRF report's
// "results" object without times: the tool, a summary, and one entry per test
// the task declares, in the task's order. Tests the report holds that the task
// does not declare are ignored.
type Report struct {
	Tool    ReportTool   `json:"tool"`
	Summary Summary      `json:"summary"`
	Tests   []TestResult `json:"tests"`
}

// ReportTool names the test runner.
type ReportTool struct {
	Name string `json:"name"`
}

// Summary counts the declared tests by status.
type Summary struct {
	Tests   int `json:"tests"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Other   int `json:"other"`
}

// TestResult is one declared test's status.
type TestResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// ErrReport reports a JUnit document that cannot be read.
var ErrReport = errors.New("malformed JUnit report")

type junitCase struct {
	Classname string     `xml:"classname,attr"`
	Name      string     `xml:"name,attr"`
	Failure   []struct{} `xml:"failure"`
	Error     []struct{} `xml:"error"`
	Skipped   []struct{} `xml:"skipped"`
}

// ParseJUnit reads a JUnit XML report (pytest's xunit2 form: testsuites >
// testsuite > testcase) and returns the Report of the declared tests. A test
// id is "classname::name". The parser reads at most maxReportBytes, and
// any number of testsuite levels; unknown elements are skipped.
func ParseJUnit(doc []byte, declared []string) (Report, error) {
	if len(doc) > maxReportBytes {
		return Report{}, fmt.Errorf("%w: over %d bytes", ErrReport, maxReportBytes)
	}
	got := map[string]string{}
	twice := map[string]bool{}
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	root := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Report{}, fmt.Errorf("%w: %v", ErrReport, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "testsuites", "testsuite":
			root = true
		case "testcase":
			var c junitCase
			if err := dec.DecodeElement(&c, &se); err != nil {
				return Report{}, fmt.Errorf("%w: %v", ErrReport, err)
			}
			id := c.Classname + "::" + c.Name
			st := TestPassed
			switch {
			case len(c.Failure)+len(c.Error) > 0:
				st = TestFailed
			case len(c.Skipped) > 0:
				st = TestSkipped
			}
			if _, dup := got[id]; dup {
				twice[id] = true
			}
			got[id] = st
		}
	}
	if !root {
		return Report{}, fmt.Errorf("%w: no testsuite element", ErrReport)
	}
	r := Report{Tool: ReportTool{Name: "pytest"}, Tests: make([]TestResult, 0, len(declared))}
	for _, id := range declared {
		st, ok := got[id]
		if !ok || twice[id] {
			st = TestOther
		}
		r.Tests = append(r.Tests, TestResult{Name: id, Status: st})
		r.Summary.Tests++
		switch st {
		case TestPassed:
			r.Summary.Passed++
		case TestFailed:
			r.Summary.Failed++
		case TestSkipped:
			r.Summary.Skipped++
		default:
			r.Summary.Other++
		}
	}
	return r, nil
}

// allFailed is the report of a verification whose every declared test counts
// as failed.
func allFailed(declared []string) Report {
	r := Report{Tool: ReportTool{Name: "pytest"}, Summary: Summary{Tests: len(declared), Failed: len(declared)},
		Tests: make([]TestResult, 0, len(declared))}
	for _, id := range declared {
		r.Tests = append(r.Tests, TestResult{Name: id, Status: TestFailed})
	}
	return r
}
