module github.com/slidelog/ratelimit

go 1.25

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/justinas/alice v1.2.0
)

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
