package model_test

import (
	"sync"
	"testing"

	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/model"
)

// testCorpus trains the test tokenizer.
var testCorpus = []string{
	"What is 12 + 30? Put the final answer in \\boxed{}.",
	"Write a short poem about the sea. Do not use any commas.",
	"Compute 7 * 8 and explain your steps.\nAnswer in English, in lowercase letters only.",
	"The quick brown fox jumps over the lazy dog. It's the dog's day, isn't it?",
	"List three colors.  Use exactly 3 bullet points in markdown.",
}

var (
	testOnce  sync.Once
	testFiles tinymodel.Files
	testModel *model.Model
	testErr   error
)

// tiny is a small generated model with tied embeddings, shared by the tests.
func tiny(t testing.TB) (*model.Model, tinymodel.Files) {
	t.Helper()
	testOnce.Do(func() {
		sh := tinymodel.ReferenceShape
		sh.Merges = 64
		sh.Tied = true
		testFiles, testErr = tinymodel.Generate("model-test", testCorpus, sh)
		if testErr == nil {
			testModel, testErr = testFiles.Load()
		}
	})
	if testErr != nil {
		t.Fatal(testErr)
	}
	return testModel, testFiles
}
