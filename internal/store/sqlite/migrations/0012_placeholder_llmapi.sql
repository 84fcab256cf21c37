-- 0012: a placeholder on branch llmapi for the migration of another branch
-- (0011: persist, 0012: runfix), so that 0013 applies here; drop it at merge.
SELECT 1;
