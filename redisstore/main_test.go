package redisstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's log lines: the failure tests make it complain
// about refused dials by the hundred, and every failure is checked by the
// tests themselves.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
