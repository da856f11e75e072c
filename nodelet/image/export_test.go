package image

import "time"

// SetMemoMargin sets memoMargin for a test, so that files made by the
// test itself are memoised at once; the returned func puts it back.
func SetMemoMargin(d time.Duration) func() {
	old := memoMargin
	memoMargin = d
	return func() { memoMargin = old }
}
