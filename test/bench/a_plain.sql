\set id random(1, :rows)
UPDATE b_plain SET v = v + 1 WHERE id = :id;
