package bitrix24

import "time"

// Tests prove that reads are retried, not how long the waits are.
func init() { retryWait = 5 * time.Millisecond }
