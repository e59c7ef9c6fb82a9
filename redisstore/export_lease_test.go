package redisstore

// MaxLease is maxLease, the length of every lease the library grants.
const MaxLease = maxLease
