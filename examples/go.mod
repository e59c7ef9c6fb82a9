module github.com/slidelog/ratelimit/examples

go 1.25.0

replace github.com/slidelog/ratelimit => ../

require github.com/slidelog/ratelimit v0.0.0-00010101000000-000000000000
