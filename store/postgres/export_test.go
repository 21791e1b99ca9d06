package postgres

// BalanceShards is balanceShards, for the tests of package postgres_test.
const BalanceShards = balanceShards
