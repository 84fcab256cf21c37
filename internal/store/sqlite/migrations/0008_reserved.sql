-- 8: reserved for the LLM archive (another branch); this placeholder
-- keeps the numbering whole until that branch's file replaces it.
SELECT 1;
