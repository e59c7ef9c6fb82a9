module github.com/slidelog/ratelimit

go 1.25

require (
	github.com/justinas/alice v1.2.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
