package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "tib": 1 << 40,
}

// parseBytes reads sizes like "8GiB", "512MiB", "1.5G", "1073741824".
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	v, err := strconv.ParseFloat(num, 64)
	mult, ok := units[unit]
	if err != nil || !ok || v <= 0 {
		return 0, fmt.Errorf("%q: want a positive size such as 8GiB, 512MiB or 1073741824", s)
	}
	b := v * mult
	if b > math.MaxInt64 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(b), nil
}
