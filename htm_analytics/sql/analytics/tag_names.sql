-- Every tag: the co-occurrence count rolls tags up to topics and orders them in the client.
SELECT id, name FROM tags
