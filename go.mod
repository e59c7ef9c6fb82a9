module github.com/slidelog/ratelimit

go 1.25

require (
	github.com/justinas/alice v1.2.0
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
