module github.com/slidelog/ratelimit/redisstore

go 1.25

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/slidelog/ratelimit v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace github.com/slidelog/ratelimit => ../
