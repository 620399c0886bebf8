\set id random(1, :rows)
UPDATE b_guard SET v = v + 1, last_fencing_token = :token WHERE id = :id;
