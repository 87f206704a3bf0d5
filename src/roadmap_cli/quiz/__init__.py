"""Quizzes and spaced review (issue 18, parts 1-3).

    units.py      what a numeric answer may be written in, and conversions
    checking.py   checks one answer against a question: correct?, feedback, FSRS rating
    session.py    `roadmap quiz`: which questions, scoring, recording attempts (evidence)
    records.py    the quiz/review tables: attempts, cards, logs (plain SQL; learner column)
    review.py     `roadmap review`: FSRS scheduling of explain checkpoints and quiz items

Nothing here imports fsrs at module level: `roadmap status` counts due
reviews with one SQL query (records.due_count) and never loads the scheduler.
"""
