-- only_comments.sql: a migration file with comments and whitespace but no statement.
-- A parser must return zero statements (not an error).

/* a block comment
   spanning lines, with a ; semicolon and 'quotes' and $$dollars$$ inside */

/* nested /* block */ comment, still a comment ; */

	-- an indented comment after a tab
