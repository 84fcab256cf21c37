-- 8: reserved for the LLM archive (branch "archive" brings the real file of
-- this name); empty here so that 0009 applies on this branch alone.
SELECT 1;
