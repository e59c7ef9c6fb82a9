module github.com/slidelog/ratelimit

go 1.25

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/justinas/alice v1.2.0
)
