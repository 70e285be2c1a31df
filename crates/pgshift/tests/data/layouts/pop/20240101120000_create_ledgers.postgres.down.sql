DROP TABLE ledgers;
