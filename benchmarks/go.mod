module github.com/slidelog/ratelimit/benchmarks

go 1.25.14

replace github.com/slidelog/ratelimit => ../

require (
	github.com/go-chi/httprate v0.16.1
	github.com/sethvargo/go-limiter v0.7.1
	github.com/slidelog/ratelimit v0.1.0
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	golang.org/x/time v0.15.0
)

require (
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.0.2 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
