package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/troupe-hpc/troupe/internal/units"
)

// Errors returned by ParseMemory and ParseWalltime, for errors.Is: the
// same values as package units returns.
var (
	ErrMemory   = units.ErrSize
	ErrWalltime = units.ErrDuration
)

// memoryHelp and walltimeHelp say what the parsers accept; they end
// diagnostics.
const (
	memoryHelp   = units.SizeHelp
	walltimeHelp = units.DurationHelp
)

// ParseMemory parses a memory size as units.ParseSize does ("16G" is
// 16 GiB). The error wraps ErrMemory.
func ParseMemory(s string) (int64, error) { return units.ParseSize(s) }

// FormatMemory writes a byte count the way ParseMemory reads it back.
func FormatMemory(b int64) string { return units.FormatSize(b) }

// ParseWalltime parses a time limit as units.ParseDuration does. The
// error wraps ErrWalltime.
func ParseWalltime(s string) (time.Duration, error) { return units.ParseDuration(s) }

// memoryValue converts a number of bytes given as an HCL number.
func memoryValue(n *big.Float) (int64, error) {
	if n.Sign() < 0 {
		return 0, fmt.Errorf("%w: %s is negative", ErrMemory, n.Text('g', -1))
	}
	i, acc := n.Int64()
	if acc == big.Below && i == math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s is too large", ErrMemory, n.Text('g', -1))
	}
	return i, nil
}
