-- 9: reserved for the LLM keys and budgets (another branch); this
-- placeholder keeps the numbering whole until that branch's file replaces
-- it.
SELECT 1;
